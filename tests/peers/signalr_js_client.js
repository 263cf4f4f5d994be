// The official Microsoft SignalR client (npm @microsoft/signalr) against a hub:
// node signalr_js_client.js URL PROMPT negotiate|skip
// Streams StreamChat(PROMPT), invokes Echo, stops; prints one JSON line.
const signalR = require("@microsoft/signalr");
const [url, prompt, mode] = process.argv.slice(2);
(async () => {
  const options = { transport: signalR.HttpTransportType.WebSockets };
  if (mode === "skip") options.skipNegotiation = true;
  const conn = new signalR.HubConnectionBuilder()
    .withUrl(url, options)
    .configureLogging(signalR.LogLevel.None)
    .build();
  await conn.start();
  const items = [];
  let error = null;
  await new Promise((resolve) => {
    conn.stream("StreamChat", prompt).subscribe({
      next: (item) => items.push(item),
      complete: () => resolve(),
      error: (e) => { error = String(e); resolve(); },
    });
  });
  const echo = await conn.invoke("Echo", "ping-back");
  await conn.stop();
  console.log(JSON.stringify({ items, error, echo }));
})().catch((e) => { console.log(JSON.stringify({ failed: String(e) })); process.exit(1); });
