// Preloaded (node --require) into the conformance suite: its mock servers
// listen on every interface; the tests bind only loopback.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof second !== "string") args.splice(1, 0, "127.0.0.1");
  } else if (first && typeof first === "object" && !first._handle && first.path === undefined && first.host === undefined) {
    args[0] = { ...first, host: "127.0.0.1" };
  } else if (first === undefined || typeof first === "function") {
    args.unshift(0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
