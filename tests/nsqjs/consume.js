// Consumes count messages with nsqjs's Reader, FINs each, prints each body
// base64-encoded on a line of its own, and exits 0 once the connection has
// closed (so every FIN has been written). Any error, or not having count
// messages within timeoutMs, exits 1 with the reason on stderr.
//
//   node consume.js <host:port> <topic> <channel> <count> [timeoutMs]
'use strict'

const nsq = require('nsqjs')

const [addr, topic, channel, countArg, timeoutArg] = process.argv.slice(2)
const count = Number(countArg)
const timeoutMs = Number(timeoutArg || 30000)
if (!addr || !topic || !channel || !(count > 0) || !(timeoutMs > 0)) {
  console.error('usage: node consume.js <host:port> <topic> <channel> <count> [timeoutMs]')
  process.exit(2)
}

function fail(why) {
  console.error(`nsqjs consumer of ${topic}/${channel} at ${addr}: ${why}`)
  process.exit(1)
}

const timer = setTimeout(
  () => fail(`${received} of ${count} messages within ${timeoutMs} ms`),
  timeoutMs
)

const reader = new nsq.Reader(topic, channel, {
  nsqdTCPAddresses: [addr],
  maxInFlight: count,
  // A redelivery would hide a lost FIN; the test wants each message once.
  maxAttempts: 1,
})

let received = 0
let closing = false
reader.on('message', (msg) => {
  if (closing) {
    // Left unfinished, it stays in the channel, where the test sees it.
    return
  }
  process.stdout.write(msg.body.toString('base64') + '\n')
  msg.finish()
  received++
  if (received === count) {
    closing = true
    // finish() writes its FIN on the next tick; closing now would end the
    // socket before the last FIN is written.
    setImmediate(() => reader.close())
  }
})
reader.on('discard', (msg) => fail(`message ${msg.id} redelivered`))
reader.on('error', (err) => fail(err && err.stack ? err.stack : String(err)))
reader.on('nsqd_closed', () => {
  if (!closing) {
    fail('nsqd closed the connection')
  }
  clearTimeout(timer)
  process.exit(0)
})
reader.connect()
