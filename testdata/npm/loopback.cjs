// Preloaded by tests with `node --require <this file>`: every server a
// package starts listens on 127.0.0.1 only (whatever host it asked for),
// and the port it got is printed to stderr as "OPSGATE_LISTENING <port>",
// so a test can start a server on port 0 and find it.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (args[0] !== null && typeof args[0] === "object") {
    args[0] = { ...args[0], host: "127.0.0.1" };
  } else if (typeof args[0] === "number" || typeof args[0] === "string") {
    const cb = args.filter((a) => typeof a === "function");
    args = [Number(args[0]), "127.0.0.1", ...cb];
  }
  this.once("listening", () => {
    const a = this.address();
    if (a && typeof a === "object") process.stderr.write(`OPSGATE_LISTENING ${a.port}\n`);
  });
  return listen.apply(this, args);
};
