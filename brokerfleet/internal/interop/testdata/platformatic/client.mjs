// Drives @platformatic/kafka against a Strata cluster for
// brokerfleet/internal/interop's TestPlatformatic: admin (create and
// delete topics, list and describe groups, list a group's offsets), a
// producer with acks all (plain and gzip batches), and two consumers in
// one group committing every message. It prints one JSON object on
// stdout with what each step saw; the Go test checks it against the
// cluster with franz-go. Settings come from the environment:
// STRATA_BOOTSTRAP (host:port,...), STRATA_TOPIC, STRATA_GROUP,
// STRATA_COUNT. Any failure exits non-zero with the error on stderr.
import { Admin, Consumer, Producer, ProduceAcks, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const brokers = process.env.STRATA_BOOTSTRAP.split(',')
const topic = process.env.STRATA_TOPIC
const group = process.env.STRATA_GROUP
const count = Number(process.env.STRATA_COUNT)
const base = { bootstrapBrokers: brokers, retries: 10, retryDelay: 200, timeout: 10000 }
const out = {}

// describe renders an error with the errors it aggregates (a client
// error after retries carries each attempt's).
function describe (err) {
  let s = err.stack ?? String(err)
  for (const [k, v] of Object.entries(err)) {
    if (k !== 'errors' && k !== 'stack' && k !== 'message') s += `\n  ${k}: ${JSON.stringify(v, (_, x) => typeof x === 'bigint' ? String(x) : x)}`
  }
  for (const e of err.errors ?? []) s += '\n  caused by: ' + describe(e).replaceAll('\n', '\n  ')
  return s
}

function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result in ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

const admin = new Admin({ ...base, clientId: 'strata-interop-admin' })
try {
  const created = await admin.createTopics({ topics: [topic, topic + '-scratch'], partitions: 3, replicas: 3 })
  out.created = created.map(t => ({ name: t.name, partitions: t.partitions, replicas: t.replicas }))
  await admin.deleteTopics({ topics: [topic + '-scratch'] })
  out.topics = (await admin.listTopics()).filter(t => t.startsWith(topic)).sort()

  // Two consumers in one group, each committing every message it reads.
  // They join before anything is produced, so both get partitions.
  const seen = new Map()
  const byMember = [0, 0]
  let resolveAll
  const all = new Promise(resolve => { resolveAll = resolve })
  const consumers = []
  const streams = []
  for (const m of [0, 1]) {
    const consumer = new Consumer({
      ...base,
      clientId: `strata-interop-consumer-${m}`,
      groupId: group,
      deserializers: stringDeserializers,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 500,
      maxWaitTime: 200
    })
    consumers.push(consumer)
    const stream = await consumer.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: false })
    streams.push(stream)
    stream.on('data', async message => {
      try {
        await message.commit()
      } catch (err) {
        process.stderr.write(`commit ${message.partition}/${message.offset}: ${describe(err)}\n`)
        process.exit(1)
      }
      if (seen.has(message.value)) process.stderr.write(`duplicate: member ${m} ${message.partition}/${message.offset} ${message.value}\n`)
      else if (process.env.STRATA_TRACE) process.stderr.write(`read: member ${m} ${message.partition}/${message.offset}\n`)
      seen.set(message.value, (seen.get(message.value) ?? 0) + 1)
      byMember[m]++
      if (seen.size === count) resolveAll()
    })
    stream.on('error', err => {
      process.stderr.write(`consumer ${m}: ${describe(err)}\n`)
      process.exit(1)
    })
  }
  await withTimeout((async () => {
    for (;;) {
      const g = (await admin.describeGroups({ groups: [group] })).get(group)
      const assigned = [...g.members.values()].filter(m => [...(m.assignments?.values() ?? [])].some(a => a.partitions.length > 0))
      if (g.state === 'STABLE' && assigned.length === 2) return
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  })(), 30000, 'both consumers assigned partitions')
  // A fetch the first consumer sent before the rebalance, for every
  // partition, may still be waiting (maxWaitTime); the client hands on
  // what it returns even for a partition it no longer owns. Let such
  // fetches end before producing, so each message has one reader.
  await new Promise(resolve => setTimeout(resolve, 1000))

  // Producer: acks all; the first half in uncompressed batches, the
  // second gzip-compressed, ten messages a send, spread over the
  // partitions by the message's number. A send answers each partition's
  // base offset; the messages of one partition follow it in order.
  const producer = new Producer({ ...base, clientId: 'strata-interop-producer', serializers: stringSerializers, acks: ProduceAcks.ALL })
  out.produced = []
  for (let i = 0; i < count; i += 10) {
    const messages = []
    for (let j = i; j < Math.min(count, i + 10); j++) {
      messages.push({ topic, partition: j % 3, key: `key-${j % 7}`, value: `value-${String(j).padStart(4, '0')}`, headers: { i: String(j) } })
    }
    const result = await producer.send({ messages, compression: i < count / 2 ? 'none' : 'gzip' })
    const next = new Map(result.offsets.map(o => [o.partition, Number(o.offset)]))
    for (const m of messages) {
      out.produced.push({ partition: m.partition, offset: next.get(m.partition) })
      next.set(m.partition, next.get(m.partition) + 1)
    }
  }
  await producer.close()

  await withTimeout(all, 60000, `the group reading ${count} messages (read ${seen.size})`)
  out.read = seen.size
  out.duplicates = [...seen.values()].filter(n => n > 1).length
  out.byMember = byMember

  const groups = await admin.describeGroups({ groups: [group] })
  const g = groups.get(group)
  out.described = { state: g.state, protocolType: g.protocolType, members: g.members.size }
  const listed = await admin.listGroups()
  out.listed = [...listed.keys()].filter(id => id === group)

  for (const s of streams) await s.close()
  for (const c of consumers) await c.close()

  const offsets = await admin.listConsumerGroupOffsets({ groups: [group] })
  out.committed = {}
  for (const t of offsets[0].topics) {
    for (const p of t.partitions) {
      out.committed[`${t.name}/${p.partitionIndex}`] = Number(p.committedOffset)
    }
  }
} catch (err) {
  process.stderr.write(describe(err) + '\n')
  process.exit(1)
} finally {
  await admin.close()
}
process.stdout.write(JSON.stringify(out) + '\n')
