"""Redis's side of ``RedisStore``: its Lua scripts, commands' keys, reply parsing.

A replica that lost its lease (a long pause) must never write past an end that a
reader appended for it. Entry IDs are ``0-<seq+1>`` and Redis refuses an ID that
is not above the stream's last one, so its next ``XADD`` (the same seq as the
reader's error) fails; a refused commit stops that stream's recording for good.
``XADD NOMKSTREAM`` keeps an expired or discarded stream from coming back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ... import events as ev
from .store import Entry

#: KEYS meta, lease. ARGV owner, model, created, lease_ms, idle_ms, token digest,
#: credential digest.
CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', 'live', 'owner', ARGV[1], 'model', ARGV[2],
           'created', ARGV[3], 'token', ARGV[6], 'cred', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4])
return 1
"""

#: KEYS meta, stream, lease. ARGV owner, maxlen, end status or '', ttl_ms, idle_ms,
#: first ('1'/'0'), mode, then (id, type, frame) per entry. A script, so that a
#: batch stops at its first refused entry instead of leaving a gap. Mode '0': a
#: seq at or below the stream's last is refused; a gap (the first entry is not
#: the next seq: a failed-over primary lost some) answers -2, writing nothing.
#: Mode '1' (a retry, or the writer's replay of its recent entries): entries
#: already stored are skipped, the others written, and an end already written by
#: this owner with the same status counts as done.
APPEND = """
local first = ARGV[6] == '1'
local retry = ARGV[7] == '1'
local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
if meta[2] ~= ARGV[1] then return 0 end
if meta[1] ~= 'live' then
  if retry and ARGV[3] ~= '' and meta[1] == ARGV[3] then return 1 end
  return 0
end
local top = -1
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if last[1] then top = tonumber(string.sub(last[1][1], 3)) end
if not retry and not first and #ARGV >= 8 and tonumber(string.sub(ARGV[8], 3)) > top + 1 then
  return -2
end
for i = 8, #ARGV, 3 do
  local id
  if retry and tonumber(string.sub(ARGV[i], 3)) <= top then
    id = true  -- stored already
  elseif first then
    id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], ARGV[i],
                    't', ARGV[i + 1], 'f', ARGV[i + 2])
  else
    id = redis.call('XADD', KEYS[2], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[2], ARGV[i],
                    't', ARGV[i + 1], 'f', ARGV[i + 2])
  end
  if not id then return 0 end
end
if ARGV[3] ~= '' then
  local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
  if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
  redis.call('HSET', KEYS[1], 'status', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('DEL', KEYS[3])
elseif first then
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return 1
"""

#: KEYS meta, stream, lease. ARGV owner, lease_ms, idle_ms. 0: not ours, 1: ok, 2: cancel.
HEARTBEAT = """
local meta = redis.call('HMGET', KEYS[1], 'status', 'owner', 'cancel')
if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if meta[3] then return 2 end
return 1
"""

#: KEYS meta. ARGV channel, request_id.
CANCEL = """
if redis.call('HGET', KEYS[1], 'status') ~= 'live' then return 0 end
redis.call('HSET', KEYS[1], 'cancel', '1')
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
"""

#: KEYS meta, lease, stream. ARGV expected top id or '', status, ttl_ms, then
#: (id, type, frame) per entry. 0: not an orphan, -1: the stream moved, 1: closed.
CLOSE_ORPHAN = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'live' then return 0 end
local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
local top_id = ''
if #top > 0 then top_id = top[1][1] end
if top_id ~= ARGV[1] then return -1 end
for i = 4, #ARGV, 3 do
  redis.call('XADD', KEYS[3], ARGV[i], 't', ARGV[i + 1], 'f', ARGV[i + 2])
end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
"""

#: KEYS meta, stream, lease, reader. ARGV owner.
DISCARD = """
local meta = redis.call('HMGET', KEYS[1], 'status', 'owner')
if meta[1] ~= 'live' or meta[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
"""

SCRIPTS: Final = {
    "create": CREATE,
    "append": APPEND,
    "heartbeat": HEARTBEAT,
    "cancel": CANCEL,
    "close_orphan": CLOSE_ORPHAN,
    "discard": DISCARD,
}
SHAS: Final = {name: hashlib.sha1(body.encode()).hexdigest() for name, body in SCRIPTS.items()}


def load_redis() -> tuple[ModuleType, ModuleType, tuple[type[BaseException], ...]]:
    """redis-py's asyncio client, its exceptions, and the ones meaning "cannot reach
    Redis" (as opposed to a refused command). Imported on first use: a gateway with
    the memory store never loads redis-py."""
    import redis.asyncio as client
    import redis.exceptions as errors

    # A Cluster mid-failover answers these until a replica has taken over: an outage.
    failover = (
        errors.ClusterDownError,
        errors.TryAgainError,
        errors.MasterDownError,
        errors.SlotNotCoveredError,
    )
    return client, errors, (errors.ConnectionError, errors.TimeoutError, OSError, *failover)


def redacted(url: str) -> str:
    """``url`` without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))


def key_of(command: Sequence[Any]) -> str | None:
    """The key a command touches (on Cluster: its slot's), ``None`` for one without.

    ``EVALSHA sha numkeys key...``, ``XREAD ... STREAMS key id``, ``PUBLISH channel``
    (a channel hashes like a key) and the one-key commands the store sends.
    """
    name = str(command[0]).upper()
    if name == "EVALSHA":
        return str(command[3]) if int(command[2]) > 0 else None
    if name == "XREAD":
        streams = [str(part).upper() for part in command].index("STREAMS")
        return str(command[streams + 1])
    if name in ("INFO", "PING", "SCRIPT", "SCRIPT LOAD") or len(command) < 2:
        return None
    return str(command[1])


def seq_of(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[2]) - 1


def entries_of(raw: Any) -> list[Entry]:
    """Entries from an XRANGE reply: ``[(id, {t, f}), ...]`` (RESP2 or RESP3)."""
    out = []
    for item in raw or ():
        entry_id, fields = item[0], item[1]
        if isinstance(fields, list):  # a raw field list, as we wrote it: t <type> f <frame>
            if fields[0] == b"t" and fields[2] == b"f":
                kind, frame = fields[1], fields[3]
            else:
                pairs = dict(zip(fields[::2], fields[1::2], strict=True))
                kind, frame = pairs[b"t"], pairs[b"f"]
        else:
            kind, frame = fields[b"t"], fields[b"f"]
        out.append(Entry(seq_of(entry_id), kind.decode(), bytes(frame)))
    return out


def raw_reply(response: Any, **options: Any) -> Any:
    return response


def xread_all(raw: Any) -> list[tuple[str, list[Entry]]]:
    """``(key, entries)`` from an XREAD reply: ``[[key, entries], ...]`` (RESP2), a map
    (RESP3), or nil."""
    if not raw:
        return []
    if isinstance(raw, dict):
        items = list(raw.items())
    else:
        items = [(item[0], item[1]) for item in raw]
    out = []
    for key, entries in items:
        if (
            entries
            and isinstance(entries[0], list)
            and entries[0]
            and isinstance(entries[0][0], list | tuple)
        ):
            entries = entries[0]  # some RESP3 shapes nest once more
        out.append((text_of(key) or "", entries_of(entries)))
    return out


def error_code_of(entry: Entry) -> str | None:
    """The code of an ``error`` entry (``None`` for another type)."""
    if entry.type != "error":
        return None
    event = ev.parse("error", entry.frame.partition(b"data: ")[2].rstrip(b"\n"))
    return event.code if isinstance(event, ev.ErrorEvent) else None


def text_of(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
