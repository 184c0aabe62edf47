// Preloaded (node --require, after nodetest's loopback.cjs) into a server
// under test: it tells the test which port it got, as one line on stderr.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  this.once("listening", () => process.stderr.write(`taskdeck-test-listening ${this.address().port}\n`));
  return listen.apply(this, args);
};
