// Preloaded (node --require) into the conformance suite: its mock servers
// listen on every interface; the tests bind only loopback. A server that
// names no host gets a handle bound to 127.0.0.1 at once, so that, as
// with no host, address() answers right after listen() (a host would
// make listen() wait for a lookup).
const net = require("node:net");
const { TCP, constants } = process.binding("tcp_wrap");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  let port;
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    if (typeof args[1] === "string") return listen.apply(this, args); // a host of its own
    port = Number(args.shift());
  } else if (args[0] === undefined || typeof args[0] === "function") {
    port = 0;
    if (args[0] === undefined) args.shift();
  } else if (args[0] && typeof args[0] === "object" && !args[0]._handle && args[0].path === undefined && args[0].host === undefined) {
    port = Number(args.shift().port ?? 0);
  } else {
    return listen.apply(this, args);
  }
  const handle = new TCP(constants.SERVER);
  const err = handle.bind("127.0.0.1", port);
  if (err) throw new Error(`cannot bind 127.0.0.1:${port} (${err})`);
  return listen.call(this, handle, ...args);
};
