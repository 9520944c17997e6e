// Server-Sent Events, parsed from a fetch() body as the WHATWG HTML
// standard describes them ("event stream interpretation"): lines end in
// \n, \r\n or \r; "event:" names the event, "data:" lines are joined with
// \n; a line starting with ":" is a comment (opsgate's keep-alive ping);
// an empty line dispatches. Fields this client does not use (id, retry)
// are ignored, and so is an event without data.

/**
 * Reads a ReadableStream of bytes and yields {event, data} for every
 * dispatched event, data as the raw string.
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{event: string, data: string}>}
 */
export async function* parseSSE(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let data = [];
  let sawCR = false;
  const line = function* (l) {
    if (l === "") {
      if (data.length > 0) {
        yield { event: event || "message", data: data.join("\n") };
      }
      event = "";
      data = [];
      return;
    }
    if (l.startsWith(":")) return;
    const i = l.indexOf(":");
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? "" : l.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let start = 0;
      for (let i = 0; i < buf.length; i++) {
        const c = buf[i];
        if (c === "\n" && sawCR) {
          // the \n of a \r\n pair: the line already ended at \r
          sawCR = false;
          start = i + 1;
          continue;
        }
        sawCR = false;
        if (c === "\n" || c === "\r") {
          yield* line(buf.slice(start, i));
          sawCR = c === "\r";
          start = i + 1;
        }
      }
      buf = buf.slice(start);
    }
    buf += decoder.decode();
    // A stream that ends without a final empty line dispatches nothing more.
  } finally {
    reader.releaseLock();
  }
}
