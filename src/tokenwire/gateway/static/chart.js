/**
 * chart.js: the playground's "tokens over time" chart, an inline SVG built
 * with DOM APIs (no library, no markup strings: the page's CSP allows no inline code).
 *
 * @module chart
 */

const SVG = "http://www.w3.org/2000/svg";
const PAD = { left: 34, right: 12, top: 12, bottom: 22 };

function el(name, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

/** A round step for an axis spanning `max`. */
function niceStep(max, ticks) {
  const raw = max / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / power;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * power;
}

/** "850 ms" or "1.2 s". */
export function formatMs(ms) {
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

/**
 * Draw cumulative tokens against time since the request into `container`
 * (its children are replaced).
 * @param {Element} container
 * @param {{points: Array<[number, number]>, ttft: number|null, end: number|null}} run
 *   `points`: (ms since the request, tokens so far) after each token event;
 *   `ttft`: time to first token in ms; `end`: when the stream ended, if it has.
 */
export function drawChart(container, { points, ttft, end }) {
  // Drawn at the container's pixel size, so text is never stretched.
  const WIDTH = Math.max(container.clientWidth || 640, 200);
  const HEIGHT = Math.max(container.clientHeight || 132, 80);
  const svg = el("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    class: "chart-svg",
  });
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const lastT = points.length ? points[points.length - 1][0] : 0;
  const maxT = Math.max(end ?? 0, lastT, ttft ?? 0, 1);
  const maxY = Math.max(points.length ? points[points.length - 1][1] : 0, 1);
  const stepY = niceStep(maxY, 3);
  const topY = Math.max(stepY, Math.ceil(maxY / stepY) * stepY);
  const x = (t) => PAD.left + (t / maxT) * plotW;
  const y = (v) => PAD.top + plotH - (v / topY) * plotH;

  // Grid and axes.
  for (let v = 0; v <= topY + 1e-9; v += stepY) {
    svg.append(
      el("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(v), y2: y(v), class: "grid" }),
    );
    svg.append(
      el(
        "text",
        { x: PAD.left - 6, y: y(v) + 3.5, class: "tick", "text-anchor": "end" },
        String(v),
      ),
    );
  }
  const stepT = niceStep(maxT, Math.max(2, Math.floor(WIDTH / 110)));
  for (let t = 0; t <= maxT + 1e-9; t += stepT) {
    // The first label starts at the axis and one near the right edge ends there:
    // centred, either would be cut off by the edge of the chart.
    const anchor = t === 0 ? "start" : x(t) > WIDTH - PAD.right - 30 ? "end" : "middle";
    svg.append(
      el(
        "text",
        { x: x(t), y: HEIGHT - 6, class: "tick", "text-anchor": anchor },
        t === 0 ? "0" : formatMs(t),
      ),
    );
  }

  if (!points.length) {
    svg.append(
      el(
        "text",
        {
          x: PAD.left + plotW / 2,
          y: PAD.top + plotH / 2,
          class: "empty",
          "text-anchor": "middle",
        },
        "tokens over time appear here",
      ),
    );
    container.replaceChildren(svg);
    return;
  }

  // The cumulative count as a step line, with a soft area under it.
  let d = `M ${x(0)} ${y(0)}`;
  let prev = 0;
  for (const [t, v] of points) {
    d += ` L ${x(t)} ${y(prev)} L ${x(t)} ${y(v)}`;
    prev = v;
  }
  const tail = end ?? lastT;
  d += ` L ${x(tail)} ${y(prev)}`;
  svg.append(el("path", { d: `${d} L ${x(tail)} ${y(0)} Z`, class: "area" }));
  svg.append(el("path", { d, class: "line" }));

  if (ttft !== null) {
    const tx = x(ttft);
    svg.append(el("line", { x1: tx, x2: tx, y1: PAD.top, y2: PAD.top + plotH, class: "ttft" }));
    const anchor = tx > WIDTH * 0.7 ? "end" : "start";
    const dx = anchor === "end" ? -5 : 5;
    svg.append(
      el(
        "text",
        { x: tx + dx, y: PAD.top + 10, class: "ttft-label", "text-anchor": anchor },
        `TTFT ${formatMs(ttft)}`,
      ),
    );
  }
  container.replaceChildren(svg);
}
