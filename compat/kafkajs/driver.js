#!/usr/bin/env node
'use strict'
/*
 * Compatibility driver for kafkajs (pure-JavaScript client) - compat/README.md.
 *
 * Runs one check per invocation against --bootstrap and prints its JSON result
 * line(s) on stdout; logs (ours and kafkajs's, level WARN and up) go to stderr.
 * The message scheme, the verification and the group scenario are ports of
 * compat/python/compat_common.py with the same semantics (keep them in step).
 *
 *   node compat/kafkajs/driver.js --bootstrap HOST:PORT
 *        --check produce-fetch|group|commit-resume|idempotent|transactions|admin
 *        [--assignor default|range|roundrobin|cooperative-sticky]
 *        [--phase a|b --state FILE] [--messages N] [--stage-timeout SECONDS]
 *
 * kafkajs has no assign(): every read is a consumer group member. Readers
 * use a fresh group with fromBeginning and never commit (the equivalent of
 * assign + seek to beginning); the commit-resume and transactions checks use
 * the group under test itself.
 */

const fs = require('fs')
const crypto = require('crypto')
const { Kafka, logLevel, Partitioners, PartitionAssigners } = require('kafkajs')

const CLIENT = 'kafkajs'
const VERSION = require('kafkajs/package.json').version

const CHECK_NAMES = ['produce-fetch', 'group', 'commit-resume', 'idempotent', 'transactions', 'admin']
const ASSIGNORS = ['default', 'range', 'roundrobin', 'cooperative-sticky']
const NOT_CHECKED = {
  admin: "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)",
}
// kafkajs 2.2.4 ships one assigner, PartitionAssigners.roundRobin (protocol
// name "RoundRobinAssigner"), which is also its default. Range and
// cooperative-sticky (KIP-429 incremental rebalancing) do not exist in it.
const NO_ASSIGNOR =
  'kafkajs ships only a RoundRobin assigner (PartitionAssigners.roundRobin, its default) and ' +
  'no incremental cooperative rebalancing; it has no %s assignor'
const PRODUCE_PARTITIONS = 3
const GROUP_PARTITIONS = 6

// -- command line, result lines, logs -------------------------------------------

function usage (msg) {
  process.stderr.write(`driver.js: ${msg}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const args = { assignor: 'default', messages: 1000, stageTimeout: 60 }
  const names = {
    '--bootstrap': 'bootstrap', '--check': 'check', '--assignor': 'assignor', '--phase': 'phase',
    '--state': 'state', '--messages': 'messages', '--stage-timeout': 'stageTimeout',
  }
  for (let k = 0; k < argv.length; k++) {
    let [flag, value] = argv[k].split(/=(.*)/s)
    if (!(flag in names)) usage(`unknown argument ${argv[k]}`)
    if (value === undefined) {
      if (k + 1 >= argv.length) usage(`${flag} needs a value`)
      value = argv[++k]
    }
    args[names[flag]] = value
  }
  if (!args.bootstrap) usage('--bootstrap is required')
  if (!CHECK_NAMES.includes(args.check)) usage(`--check must be one of ${CHECK_NAMES.join('|')}`)
  if (!ASSIGNORS.includes(args.assignor)) usage(`--assignor must be one of ${ASSIGNORS.join('|')}`)
  if (args.phase !== undefined && !['a', 'b'].includes(args.phase)) usage('--phase must be a or b')
  args.messages = Number(args.messages)
  args.stageTimeout = Number(args.stageTimeout)
  if (!Number.isInteger(args.messages) || args.messages < 0) usage('--messages must be an integer')
  if (!(args.stageTimeout > 0)) usage('--stage-timeout must be a positive number')
  return args
}

class Reporter {
  constructor () { this.emitted = new Set() }

  emit (check, result, detail) {
    if (!['pass', 'fail', 'n/a'].includes(result)) throw new Error(`bad result ${result}`)
    const line = JSON.stringify({ client: CLIENT, version: VERSION, check, result, detail })
    fs.writeSync(1, line + '\n') // synchronous: nothing is lost on process.exit
    this.emitted.add(check)
  }

  verdict (check, problems, okDetail) {
    if (problems.length) {
      this.emit(check, 'fail', problems.join('; ').slice(0, 2000))
      return false
    }
    this.emit(check, 'pass', okDetail)
    return true
  }
}

function groupCheckName (assignor) {
  return assignor === 'default' ? 'group' : `group:${assignor}`
}

function unique (prefix) {
  return `${prefix}-${crypto.randomBytes(5).toString('hex')}`
}

function log (msg) {
  const t = new Date().toISOString().slice(11, 19)
  process.stderr.write(`[${t}] ${msg}\n`)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const now = () => performance.now() / 1000

/**
 * Subscribe `consumer` to `topic` from the beginning (where its group has
 * committed nothing) and run it without auto-commit; `handlers` holds
 * consumer.run's eachMessage or eachBatch.
 */
async function runFromStart (consumer, topic, handlers) {
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ autoCommit: false, ...handlers })
}

/** promise, or a rejection after `seconds` (every wait is bounded). */
function withTimeout (promise, seconds, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${seconds}s`)), seconds * 1000)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// -- messages (compat_common.message_key / message_value / value_index) -------

const messageKey = i => `key-${i}`
const messageValue = (tag, i) => `${tag}-${String(i).padStart(7, '0')}`

function valueIndex (tag, value) {
  if (value === null || value === undefined) return null
  const s = value.toString()
  const cut = s.lastIndexOf('-')
  if (cut < 0) return null
  const head = s.slice(0, cut)
  const num = s.slice(cut + 1)
  if (head !== tag || !/^[0-9]+$/.test(num)) return null
  return Number(num)
}

// -- verification (compat_common.verify_*) ------------------------------------
// acks: Map i -> [partition, offset]; records: [partition, offset, value]

function verifyAcks (n, acks, errors) {
  const problems = []
  if (errors.length) problems.push(`${errors.length} delivery errors, first: ${errors[0]}`)
  const missing = []
  for (let i = 0; i < n; i++) if (!acks.has(i)) missing.push(i)
  if (missing.length) problems.push(`${missing.length} of ${n} not acknowledged (first i=${missing[0]})`)
  const bad = [...acks].filter(([, [p, o]]) => !(p >= 0 && o >= 0))
  if (bad.length) problems.push(`${bad.length} acks without partition/offset (i=${bad[0][0]}: ${bad[0][1]})`)
  const positions = new Set([...acks.values()].map(([p, o]) => `${p}/${o}`))
  if (positions.size !== acks.size) problems.push('two messages acknowledged at the same partition/offset')
  return problems
}

function verifyReadBack (tag, n, records, acks) {
  const problems = []
  const seen = new Map()
  const byPartition = new Map()
  let dups = 0
  let foreign = 0
  for (const [p, o, v] of records) {
    const i = valueIndex(tag, v)
    if (i === null || !(i >= 0 && i < n)) { foreign++; continue }
    if (seen.has(i)) { dups++; continue }
    seen.set(i, [p, o])
    if (!byPartition.has(p)) byPartition.set(p, [])
    byPartition.get(p).push([o, i])
  }
  if (foreign) problems.push(`${foreign} records that are not ours`)
  if (dups) problems.push(`${dups} duplicates`)
  if (seen.size !== n) {
    let first = 0
    while (seen.has(first)) first++
    problems.push(`read ${seen.size} of ${n} (first missing i=${first})`)
  }
  for (const p of [...byPartition.keys()].sort((a, b) => a - b)) {
    const items = byPartition.get(p).sort((a, b) => a[0] - b[0])
    const seq = items.map(([, i]) => i)
    if (seq.some((i, k) => k > 0 && seq[k - 1] > i)) problems.push(`partition ${p}: produce order not kept`)
  }
  if (acks) {
    const moved = [...seen].filter(([i, [p, o]]) => {
      const a = acks.get(i)
      return !a || a[0] !== p || a[1] !== o
    })
    if (moved.length) {
      const [i, pos] = moved[0]
      problems.push(`${moved.length} records not at their acked position ` +
        `(i=${i}: acked ${JSON.stringify(acks.get(i) || null)}, read ${JSON.stringify(pos)})`)
    }
  }
  return problems
}

function partitionCounts (positions) {
  const counts = {}
  for (const [p] of positions) counts[p] = (counts[p] || 0) + 1
  return JSON.stringify(counts)
}

function splitOk (assignments, perMember, partitions) {
  if (assignments.some(a => a.size !== perMember)) return false
  const union = new Set()
  let total = 0
  for (const a of assignments) { for (const p of a) union.add(p); total += a.size }
  return union.size === partitions && total === partitions
}

function describeSplit (assignments) {
  return assignments.map(a => '[' + [...a].sort((x, y) => x - y).join(',') + ']').join(' ')
}

/** true once cond() held for `hold` s in a row, false after `timeout` s. */
async function waitStable (cond, timeout, hold = 1.0, interval = 0.1) {
  const deadline = now() + timeout
  let since = null
  while (now() < deadline) {
    if (cond()) {
      if (since === null) since = now()
      if (now() - since >= hold) return true
    } else {
      since = null
    }
    await sleep(interval * 1000)
  }
  return false
}

async function waitUntil (cond, timeout, interval = 0.05) {
  const deadline = now() + timeout
  while (now() < deadline) {
    if (cond()) return true
    await sleep(interval * 1000)
  }
  return cond()
}

/** compat_common.group_scenario: 2/2/2, one leaves -> 3/3, one joins -> 2/2/2. */
async function groupScenario (startMember, stageTimeout, partitions = GROUP_PARTITIONS) {
  let members = [0, 1, 2].map(k => startMember(k))
  const stages = []
  const problems = []
  try {
    for (const [label, perMember, change] of [
      ['3 members', partitions / 3, null],
      ['1 left', partitions / 2, 'leave'],
      ['1 joined', partitions / 3, 'join'],
    ]) {
      if (change === 'leave') {
        await members[0].close()
        members = members.slice(1)
      } else if (change === 'join') {
        members.push(startMember(3))
      }
      const t0 = now()
      const ok = await waitStable(
        () => splitOk(members.map(m => m.assigned()), perMember, partitions), stageTimeout)
      const split = describeSplit(members.map(m => m.assigned()))
      stages.push(`${label}: ${split} after ${(now() - t0).toFixed(1)}s`)
      if (!ok) {
        const want = members.map(() => String(perMember)).join('/')
        problems.push(`${label}: wanted ${want} within ${stageTimeout}s, have ${split}`)
        break
      }
      log(stages[stages.length - 1])
    }
  } finally {
    await Promise.all(members.map(m => m.close()))
  }
  const errors = members.map((m, k) => m.error ? `member ${k}: ${m.error}` : null).filter(Boolean)
  if (problems.length && errors.length) problems.push('client errors: ' + errors.join('; '))
  return [problems, stages.join('; ')]
}

function verifyResume (state, records) {
  const problems = []
  const end = new Map(Object.entries(state.end_offsets).map(([p, o]) => [Number(p), o]))
  // a partition phase a never committed starts from the beginning (fromBeginning)
  const committed = new Map([...end.keys()].map(p => [p, 0]))
  for (const [p, o] of Object.entries(state.committed)) committed.set(Number(p), o)
  const consumedA = new Set(state.consumed.map(([p, o]) => `${p}/${o}`))
  const first = new Map()
  const got = new Set()
  for (const [p, o] of records) {
    if (!first.has(p)) first.set(p, o)
    got.add(`${p}/${o}`)
  }
  for (const p of [...committed.keys()].sort((a, b) => a - b)) {
    const c = committed.get(p)
    if (c < end.get(p) && first.get(p) !== c) {
      problems.push(`partition ${p}: committed ${c}, first read ${first.has(p) ? first.get(p) : 'None'}`)
    }
  }
  const reread = [...got].filter(x => consumedA.has(x))
  if (reread.length) {
    problems.push(`${reread.length} records re-read that phase a had committed, e.g. ${reread.sort()[0]}`)
  }
  const want = []
  for (const [p, e] of end) for (let o = committed.get(p); o < e; o++) want.push(`${p}/${o}`)
  const notRead = want.filter(x => !got.has(x))
  if (notRead.length) {
    problems.push(`${notRead.length} of the ${want.length} uncommitted records not read, e.g. ${notRead[0]}`)
  }
  if (records.length !== got.size) problems.push(`${records.length - got.size} duplicate deliveries in phase b`)
  return problems
}

function verifyTransactions (n, committed, abortedTag, outValues, expectedOut, uncommittedInputAborted, lag) {
  const problems = []
  const leaked = committed.filter(v => v.startsWith(abortedTag))
  if (leaked.length) problems.push(`read_committed saw ${leaked.length} aborted records, e.g. ${JSON.stringify(leaked[0])}`)
  if (committed.length - leaked.length !== n) {
    problems.push(`read_committed saw ${committed.length - leaked.length} committed input records, want ${n}`)
  }
  if (uncommittedInputAborted === 0) problems.push('read_uncommitted saw no aborted record: the abort was not written')
  const got = new Set(outValues)
  if (outValues.length !== got.size) problems.push(`${outValues.length - got.size} duplicate records in the output`)
  const missing = [...expectedOut].filter(v => !got.has(v)).length
  const unexpected = [...got].filter(v => !expectedOut.has(v)).length
  if (missing || unexpected) problems.push(`output: ${missing} missing, ${unexpected} unexpected`)
  if (lag !== 0) problems.push(`the group's committed offsets leave ${lag} committed records to re-read`)
  return problems
}

// -- kafkajs ------------------------------------------------------------------

function kafkaClient (args, clientId) {
  const levels = { [logLevel.ERROR]: 'ERROR', [logLevel.WARN]: 'WARN', [logLevel.INFO]: 'INFO', [logLevel.DEBUG]: 'DEBUG' }
  return new Kafka({
    clientId: clientId || 'chronik-compat-kafkajs',
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log: entry }) => {
      const { message, timestamp, logger, ...extra } = entry
      process.stderr.write(`[kafkajs ${levels[level] || level}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
    },
  })
}

async function createTopic (kafka, topic, partitions, timeout) {
  const admin = kafka.admin()
  await withTimeout(admin.connect(), timeout, 'admin connect')
  try {
    await withTimeout(admin.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: timeout * 1000,
    }), timeout, `create topic ${topic}`)
    const visible = async () => {
      try {
        const md = await admin.fetchTopicMetadata({ topics: [topic] })
        return md.topics[0].partitions.length === partitions
      } catch (e) {
        return false
      }
    }
    const deadline = now() + timeout
    while (!(await visible())) {
      if (now() > deadline) throw new Error(`topic ${topic} not visible with ${partitions} partitions`)
      await sleep(100)
    }
  } finally {
    await admin.disconnect()
  }
}

/**
 * The partition kafkajs's own (Java-compatible murmur2) DefaultPartitioner
 * picks for each message, recorded by key: kafkajs acknowledges one
 * baseOffset per partition of a send(), and keeps the send's message order
 * within a partition, so message k of partition p in a send is at baseOffset + k.
 */
function recordingPartitioner (chosen) {
  return () => {
    const inner = Partitioners.DefaultPartitioner()
    return args => {
      const p = inner(args)
      chosen.set(args.message.key.toString(), p)
      return p
    }
  }
}

/** Produce n keyed messages (acks=-1) in sends of `chunk`; returns [acks, errors]. */
async function produce (kafka, topic, tag, n, timeout, extra = {}, chunk = 100) {
  const acks = new Map()
  const errors = []
  const chosen = new Map()
  const producer = kafka.producer({ createPartitioner: recordingPartitioner(chosen), ...extra })
  await withTimeout(producer.connect(), timeout, 'producer connect')
  const deadline = now() + timeout
  try {
    for (let start = 0; start < n; start += chunk) {
      const idx = []
      for (let i = start; i < Math.min(n, start + chunk); i++) idx.push(i)
      const left = deadline - now()
      if (left <= 0) {
        errors.push(`i=${start}: not sent, ${timeout}s stage timeout spent`)
        break
      }
      let meta
      try {
        meta = await withTimeout(producer.send({
          topic,
          acks: -1,
          messages: idx.map(i => ({ key: messageKey(i), value: messageValue(tag, i) })),
        }), left, `send of i=${start}..${start + idx.length - 1}`)
      } catch (e) {
        errors.push(`i=${start}..${start + idx.length - 1}: ${e}`)
        continue
      }
      const base = new Map()
      for (const m of meta) {
        if (m.errorCode) errors.push(`partition ${m.partition}: error code ${m.errorCode}`)
        base.set(m.partition, Number(m.baseOffset))
      }
      const next = new Map()
      for (const i of idx) {
        const p = chosen.get(messageKey(i))
        if (p === undefined || !base.has(p)) { errors.push(`i=${i}: no partition/offset in the send's metadata`); continue }
        const k = next.get(p) || 0
        next.set(p, k + 1)
        acks.set(i, [p, base.get(p) + k])
      }
    }
  } finally {
    await producer.disconnect()
  }
  return [acks, errors]
}

/**
 * Read `topic` as a member of `groupId` (fresh group: from the beginning;
 * the group under test: from its committed offsets), never committing, until
 * `want` records, then (quiet > 0) `quiet` more seconds for any extra.
 * Returns [partition, offset, value string, key string] records.
 */
async function readRecords (kafka, { topic, groupId, want, timeout, quiet = 0, readUncommitted = false, waitJoin = false }) {
  const records = []
  const consumer = kafka.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 500 })
  let joined = false
  let fetchesAfterJoin = 0
  let crash = null
  consumer.on(consumer.events.GROUP_JOIN, () => { joined = true; fetchesAfterJoin = 0 })
  consumer.on(consumer.events.FETCH, () => { if (joined) fetchesAfterJoin++ })
  consumer.on(consumer.events.CRASH, e => { crash = e.payload.error })
  await withTimeout(consumer.connect(), timeout, 'consumer connect')
  try {
    await runFromStart(consumer, topic, {
      eachMessage: async ({ partition, message }) => {
        records.push([partition, Number(message.offset),
          message.value === null ? null : message.value.toString(),
          message.key === null ? null : message.key.toString()])
      },
    })
    const deadline = now() + timeout
    // want 0 (nothing expected): joined and fetched twice (maxWaitTimeInMs 500) before the quiet time
    if (waitJoin) await waitUntil(() => fetchesAfterJoin >= 2 || crash, timeout)
    if (want > 0) await waitUntil(() => records.length >= want || crash, Math.max(0, deadline - now()))
    if (quiet > 0) {
      const until = now() + quiet
      await waitUntil(() => crash, Math.max(0, Math.min(until, deadline + quiet) - now()))
    }
    if (crash) throw crash
  } finally {
    await withTimeout(consumer.disconnect(), timeout, 'consumer disconnect').catch(e => log(String(e)))
  }
  return records
}

function endOffsets (acks) {
  const end = {}
  for (const [p, o] of acks.values()) end[p] = Math.max(end[p] || 0, o + 1)
  return end
}

// -- checks -------------------------------------------------------------------

async function checkProduceFetch (rep, args) {
  const kafka = kafkaClient(args)
  const topic = unique('compat-produce')
  await createTopic(kafka, topic, PRODUCE_PARTITIONS, args.stageTimeout)
  const [acks, errors] = await produce(kafka, topic, topic, args.messages, args.stageTimeout)
  rep.verdict('produce', verifyAcks(args.messages, acks, errors),
    `${args.messages} acked (acks=-1, kafkajs DefaultPartitioner), per partition ${partitionCounts(acks.values())}`)
  const records = await readRecords(kafka, {
    topic, groupId: unique('compat-reader'), want: args.messages, timeout: args.stageTimeout,
  })
  rep.verdict('fetch', verifyReadBack(topic, args.messages, records, acks),
    `${records.length} read back by a fresh group (fromBeginning, no commits; kafkajs has no assign()), ` +
    'order and offsets as acked')
}

/** One group member; assigned() is its latest GROUP_JOIN assignment, empty while rebalancing. */
class Member {
  constructor (kafka, group, topic, assigners) {
    this.error = null
    this._assigned = new Set()
    this._closed = null
    this.consumer = kafka.consumer({ groupId: group, partitionAssigners: assigners })
    const ev = this.consumer.events
    this.consumer.on(ev.GROUP_JOIN, e => {
      this._assigned = new Set(e.payload.memberAssignment[topic] || [])
    })
    this.consumer.on(ev.REBALANCING, () => { this._assigned = new Set() })
    this.consumer.on(ev.STOP, () => { this._assigned = new Set() })
    this.consumer.on(ev.CRASH, e => {
      this._assigned = new Set()
      if (!this.error) this.error = String(e.payload.error)
    })
    this._started = (async () => {
      await this.consumer.connect()
      await runFromStart(this.consumer, topic, { eachMessage: async () => {} })
    })().catch(e => { if (!this.error) this.error = String(e) })
  }

  assigned () { return new Set(this._assigned) }

  close () {
    if (!this._closed) {
      this._closed = (async () => {
        await this._started
        await withTimeout(this.consumer.disconnect(), 30, 'member disconnect')
      })().catch(e => { if (!this.error) this.error = String(e) })
        .finally(() => { this._assigned = new Set() })
    }
    return this._closed
  }
}

async function checkGroup (rep, args) {
  const name = groupCheckName(args.assignor)
  let assigners
  if (args.assignor === 'default') {
    assigners = undefined // kafkajs's default: [PartitionAssigners.roundRobin]
  } else if (args.assignor === 'roundrobin') {
    assigners = [PartitionAssigners.roundRobin]
  } else {
    rep.emit(name, 'n/a', NO_ASSIGNOR.replace('%s', args.assignor))
    return
  }
  const kafka = kafkaClient(args)
  const topic = unique('compat-group')
  const group = unique('compat-group')
  await createTopic(kafka, topic, GROUP_PARTITIONS, args.stageTimeout)
  const [problems, detail] = await groupScenario(
    () => new Member(kafka, group, topic, assigners), args.stageTimeout)
  const how = args.assignor === 'roundrobin'
    ? 'PartitionAssigners.roundRobin (kafkajs\'s only assigner, protocol "RoundRobinAssigner")'
    : 'kafkajs default assigner (RoundRobinAssigner)'
  rep.verdict(name, problems, `${how}: ${detail}`)
}

async function checkCommitResume (rep, args) {
  const kafka = kafkaClient(args)
  const timeout = args.stageTimeout
  if (args.phase === 'a') {
    if (!args.state) throw new Error('--phase a needs --state FILE')
    const topic = unique('compat-resume')
    const group = unique('compat-resume')
    await createTopic(kafka, topic, PRODUCE_PARTITIONS, timeout)
    const [acks, errors] = await produce(kafka, topic, topic, args.messages, timeout)
    const problems = verifyAcks(args.messages, acks, errors)
    if (problems.length) {
      rep.emit('commit-resume', 'fail', 'phase a produce: ' + problems.join('; '))
      return
    }
    const half = Math.floor(args.messages / 2)
    const consumed = []
    const last = new Map()
    let commitDone = null
    let crash = null
    const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500 })
    consumer.on(consumer.events.CRASH, e => { crash = e.payload.error })
    let want
    await withTimeout(consumer.connect(), timeout, 'consumer connect')
    try {
      await runFromStart(consumer, topic, {
        eachMessage: async ({ partition, message }) => {
          if (consumed.length >= half) return // stop exactly at `half`, even mid-batch
          const o = Number(message.offset)
          consumed.push([partition, o])
          last.set(partition, o)
          if (consumed.length === half) {
            consumer.pause([{ topic }])
            want = Object.fromEntries([...last].sort((a, b) => a[0] - b[0]).map(([p, o2]) => [p, o2 + 1]))
            // synchronous commit from inside the generation that consumed them
            commitDone = consumer.commitOffsets(Object.entries(want).map(
              ([p, off]) => ({ topic, partition: Number(p), offset: String(off) })))
              .then(() => 'ok', e => e)
          }
        },
      })
      await waitUntil(() => commitDone !== null || crash, timeout)
      if (crash) throw crash
      if (commitDone === null) {
        rep.emit('commit-resume', 'fail', `phase a consumed ${consumed.length} of ${half}`)
        return
      }
      const res = await withTimeout(commitDone, timeout, 'commitOffsets')
      if (res !== 'ok') {
        rep.emit('commit-resume', 'fail', `phase a commitOffsets failed: ${res}`)
        return
      }
    } finally {
      await withTimeout(consumer.disconnect(), timeout, 'consumer disconnect').catch(e => log(String(e)))
    }
    // OffsetFetch through the admin client
    const admin = kafka.admin()
    await withTimeout(admin.connect(), timeout, 'admin connect')
    let fetched
    try {
      fetched = await withTimeout(admin.fetchOffsets({ groupId: group, topics: [topic] }), timeout, 'fetchOffsets')
    } finally {
      await admin.disconnect()
    }
    const committed = {}
    for (const { partition, offset } of fetched[0].partitions) {
      if (String(partition) in want) committed[partition] = Number(offset)
    }
    const others = fetched[0].partitions.filter(x => !(String(x.partition) in want) && Number(x.offset) >= 0)
    if (JSON.stringify(committed) !== JSON.stringify(want) || others.length) {
      rep.emit('commit-resume', 'fail',
        `committed ${JSON.stringify(want)}, OffsetFetch says ${JSON.stringify(fetched[0].partitions)}`)
      return
    }
    fs.writeFileSync(args.state, JSON.stringify({
      topic, group, committed, consumed, end_offsets: endOffsets(acks),
    }))
    log(`phase a: consumed ${consumed.length}, committed ${JSON.stringify(committed)}`)
    return
  }
  if (args.phase !== 'b' || !args.state) throw new Error('commit-resume needs --phase a|b --state FILE')
  const state = JSON.parse(fs.readFileSync(args.state, 'utf8'))
  const end = new Map(Object.entries(state.end_offsets).map(([p, o]) => [Number(p), o]))
  const committed = new Map(Object.entries(state.committed).map(([p, o]) => [Number(p), o]))
  const records = []
  const high = new Map()
  let crash = null
  const done = () => [...end].every(([p, e]) =>
    (high.has(p) ? high.get(p) : (committed.has(p) ? committed.get(p) : 0) - 1) + 1 >= e)
  const consumer = kafka.consumer({ groupId: state.group, maxWaitTimeInMs: 500 })
  consumer.on(consumer.events.CRASH, e => { crash = e.payload.error })
  await withTimeout(consumer.connect(), timeout, 'consumer connect')
  try {
    await runFromStart(consumer, state.topic, {
      eachMessage: async ({ partition, message }) => {
        const o = Number(message.offset)
        records.push([partition, o, message.value && message.value.toString()])
        high.set(partition, Math.max(high.has(partition) ? high.get(partition) : -1, o))
      },
    })
    await waitUntil(() => done() || crash, timeout)
    if (crash) throw crash
  } finally {
    await withTimeout(consumer.disconnect(), timeout, 'consumer disconnect').catch(e => log(String(e)))
  }
  const at = JSON.stringify(Object.fromEntries(committed))
  rep.verdict('commit-resume', verifyResume(state, records),
    `resumed after broker restart at ${at}, read the other ${records.length}`)
}

async function checkIdempotent (rep, args) {
  const kafka = kafkaClient(args)
  const topic = unique('compat-idempotent')
  await createTopic(kafka, topic, PRODUCE_PARTITIONS, args.stageTimeout)
  const [acks, errors] = await produce(kafka, topic, topic, args.messages, args.stageTimeout,
    { idempotent: true, maxInFlightRequests: 1 })
  let problems = verifyAcks(args.messages, acks, errors)
  if (!problems.length) {
    const records = await readRecords(kafka, {
      topic, groupId: unique('compat-reader'), want: args.messages, timeout: args.stageTimeout,
    })
    problems = verifyReadBack(topic, args.messages, records, acks)
  }
  rep.verdict('idempotent', problems,
    `idempotent: true, maxInFlightRequests: 1: ${args.messages} acked and read back once, in order`)
}

async function checkTransactions (rep, args) {
  const n = args.messages
  const timeout = args.stageTimeout
  const kafka = kafkaClient(args)
  const src = unique('compat-txn-in')
  const dst = unique('compat-txn-out')
  for (const topic of [src, dst]) await createTopic(kafka, topic, PRODUCE_PARTITIONS, timeout)
  const abortedTag = src + '-aborted'
  const aborted = Math.max(Math.floor(n / 2), 1)
  const txnConf = id => ({
    transactionalId: id, idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner,
  })

  // 1. n committed, then `aborted` aborted, by one transactional producer
  const producer = kafka.producer(txnConf(unique('compat-txn')))
  await withTimeout(producer.connect(), timeout, 'transactional producer connect (InitProducerId)')
  try {
    let txn = await withTimeout(producer.transaction(), timeout, 'begin transaction')
    const committedMsgs = []
    for (let i = 0; i < n; i++) committedMsgs.push({ key: messageKey(i), value: messageValue(src, i) })
    await withTimeout(txn.send({ topic: src, messages: committedMsgs }), timeout, 'transactional send')
    await withTimeout(txn.commit(), timeout, 'commit transaction')
    txn = await withTimeout(producer.transaction(), timeout, 'begin transaction')
    const abortedMsgs = []
    for (let i = 0; i < aborted; i++) abortedMsgs.push({ key: messageKey(i), value: messageValue(abortedTag, i) })
    await withTimeout(txn.send({ topic: src, messages: abortedMsgs }), timeout, 'transactional send')
    await withTimeout(txn.abort(), timeout, 'abort transaction')
  } finally {
    await producer.disconnect()
  }

  log(`${n} committed and ${aborted} aborted in ${src}`)
  // 2. consume-transform-produce: a read_committed member of `group`, its offsets
  //    committed in the output producer's transactions (sendOffsets)
  const group = unique('compat-txn-group')
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false, maxWaitTimeInMs: 500 })
  const ctp = kafka.producer(txnConf(unique('compat-ctp')))
  let processed = 0
  let transactions = 0
  let failure = null
  await withTimeout(ctp.connect(), timeout, 'transactional producer connect (InitProducerId)')
  await withTimeout(consumer.connect(), timeout, 'consumer connect')
  consumer.on(consumer.events.CRASH, e => { failure = failure || `consumer crashed: ${e.payload.error}` })
  try {
    await runFromStart(consumer, src, {
      eachBatch: async ({ batch, heartbeat }) => {
        if (failure || !batch.messages.length) return
        let step = 'begin (producer.transaction())'
        const txn = await ctp.transaction()
        try {
          step = 'transaction.send'
          await txn.send({
            topic: dst,
            messages: batch.messages.map(m => ({ key: m.key, value: 'out-' + m.value.toString() })),
          })
          step = 'transaction.sendOffsets (AddOffsetsToTxn, then TxnOffsetCommit v0/v1, which carry no member id or generation)'
          const next = String(Number(batch.lastOffset()) + 1)
          await txn.sendOffsets({
            consumerGroupId: group,
            topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
          })
          step = 'transaction.commit'
          await txn.commit()
        } catch (e) {
          failure = failure || `transaction ${transactions + 1} (partition ${batch.partition}, ` +
            `${batch.messages.length} records from offset ${batch.firstOffset()}) failed in ${step}: ${e}`
          log(failure)
          await txn.abort().catch(e2 => log(`abort after the failure: ${e2}`))
          return
        }
        processed += batch.messages.length
        transactions++
        await heartbeat()
      },
    })
    await waitUntil(() => processed >= n || failure, timeout)
  } finally {
    await withTimeout(consumer.disconnect(), timeout, 'consumer disconnect').catch(e => log(String(e)))
    await ctp.disconnect()
  }
  if (failure) {
    rep.emit('transactions', 'fail', `consume-transform-produce after ${processed} of ${n} records ` +
      `in ${transactions} committed transactions: ${failure}`)
    return
  }
  log(`consume-transform-produce: ${processed} records in ${transactions} transactions`)
  // the group's committed offsets (OffsetFetch through the admin client)
  const admin = kafka.admin()
  await withTimeout(admin.connect(), timeout, 'admin connect')
  let committedOffsets
  try {
    committedOffsets = (await withTimeout(admin.fetchOffsets({ groupId: group, topics: [src] }),
      timeout, 'fetchOffsets'))[0].partitions
  } finally {
    await admin.disconnect()
  }

  // 3. verification reads
  const values = rs => rs.map(r => r[2])
  const inputCommitted = values(await readRecords(kafka,
    { topic: src, groupId: unique('compat-reader'), want: n, timeout, quiet: 1.0 }))
  log(`read_committed input: ${inputCommitted.length}`)
  const inputAll = values(await readRecords(kafka,
    { topic: src, groupId: unique('compat-reader'), want: n + aborted, timeout, quiet: 1.0, readUncommitted: true }))
  log(`read_uncommitted input: ${inputAll.length}`)
  const out = values(await readRecords(kafka,
    { topic: dst, groupId: unique('compat-reader'), want: n, timeout, quiet: 1.0 }))
  log(`read_committed output: ${out.length}`)
  // resume from the group's committed offsets: a new member of the group itself
  const lag = (await readRecords(kafka,
    { topic: src, groupId: group, want: 0, timeout, quiet: 2.0, waitJoin: true })).length
  const expected = new Set()
  for (let i = 0; i < n; i++) expected.add('out-' + messageValue(src, i))
  const seenAborted = inputAll.filter(v => v && v.startsWith(abortedTag)).length
  const problems = verifyTransactions(n, inputCommitted, abortedTag, out, expected, seenAborted, lag)
  if (processed !== n) problems.push(`consume-transform-produce processed ${processed} of ${n}`)
  const offs = JSON.stringify(Object.fromEntries(committedOffsets.map(x => [x.partition, Number(x.offset)])))
  rep.verdict('transactions', problems,
    `${n} committed + ${aborted} aborted; read_committed saw ${inputCommitted.length}, ` +
    `read_uncommitted ${inputAll.length}; ${n} transformed once in ${transactions} transactions ` +
    `with transaction.sendOffsets (group offsets ${offs}); lag after ${lag}`)
}

// -- main (compat_common.run_main) ------------------------------------------------

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const rep = new Reporter()
  const name = args.check
  const resultName = name === 'group' ? groupCheckName(args.assignor) : name
  const pending = name === 'produce-fetch' ? ['produce', 'fetch'] : [resultName]
  const crashed = e => {
    process.stderr.write(`${(e && e.stack) || e}\n`)
    for (const check of pending) {
      if (!rep.emitted.has(check)) rep.emit(check, 'fail', `driver error: ${e}`)
    }
    process.exit(1)
  }
  process.on('uncaughtException', crashed)
  process.on('unhandledRejection', crashed)
  const checks = {
    'produce-fetch': checkProduceFetch,
    group: checkGroup,
    'commit-resume': checkCommitResume,
    idempotent: checkIdempotent,
    transactions: checkTransactions,
  }
  try {
    if (!(name in checks)) {
      rep.emit(resultName, 'n/a', NOT_CHECKED[name])
    } else {
      await checks[name](rep, args)
    }
  } catch (e) {
    crashed(e)
  }
  process.exit(0) // kafkajs may leave timers and sockets behind
}

main()
