// Server-sent events read from a fetch body, as the HTML standard parses them
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// lines ending in CR, LF or CRLF; "field: value"; a blank line dispatches the event; lines
// starting with ":" are comments (the gateway's keep-alive pings).

/** Yield {event, data, id} for each event of `body` (a ReadableStream of bytes). */
export async function* serverSentEvents(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = { event: "message", data: [], id: null };
  try {
    while (!signal?.aborted) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      const lines = buffer.split(/\r\n|\r|\n/);
      // The last piece may be a line still arriving (a CR may be followed by its LF later).
      buffer = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (event.data.length) {
            yield { event: event.event, data: event.data.join("\n"), id: event.id };
          }
          event = { event: "message", data: [], id: event.id };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event.event = value;
        else if (field === "data") event.data.push(value);
        else if (field === "id" && !value.includes("\0")) event.id = value;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
