package chronik.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * Compatibility driver for the Apache Kafka Java client (compat/README.md, "Driver contract").
 *
 * <p>One check per invocation against --bootstrap; prints its JSON result line(s) on stdout,
 * client logs go to stderr. Uses the classic consumer-group protocol (the client's default in
 * 4.x). KafkaConsumer is not thread-safe: every group member
 * is created, polled and closed on its own thread.
 */
public final class Driver {
    static final int PRODUCE_PARTITIONS = 3;
    static final int GROUP_PARTITIONS = 6;
    static final String CLIENT = "kafka-clients (Java)";

    final Map<String, String> args;
    final String bootstrap;
    final int messages;
    final long stageMs;
    final Set<String> emitted = new HashSet<>();
    /** Settings every client of this driver gets (the security check's TLS and SASL). */
    final Properties common = new Properties();

    Driver(Map<String, String> args) {
        this.args = args;
        this.bootstrap = args.get("bootstrap");
        this.messages = Integer.parseInt(args.getOrDefault("messages", "1000"));
        this.stageMs = (long) (Double.parseDouble(args.getOrDefault("stage-timeout", "60")) * 1000);
    }

    public static void main(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        if (!args.containsKey("bootstrap") || !args.containsKey("check")) {
            System.err.println("usage: Driver --bootstrap HOST:PORT --check CHECK [--assignor A] "
                    + "[--phase a|b --state FILE] [--messages N] [--stage-timeout S] "
                    + "[--kill-request FILE --kill-done FILE (eos-failover)] "
                    + "[--sasl-bootstrap H:P --ssl-bootstrap H:P --ssl-ca F --ssl-cert F --ssl-key F "
                    + "--sasl-username U --sasl-password P --topic-prefix T --group-prefix G --denied-topic T (security)]");
            System.exit(2);
        }
        Driver d = new Driver(args);
        String check = args.get("check");
        String assignor = args.getOrDefault("assignor", "default");
        List<String> pending = switch (check) {
            case "produce-fetch" -> List.of("produce", "fetch");
            case "group" -> List.of(assignor.equals("default") ? "group" : "group:" + assignor);
            default -> List.of(check);
        };
        int rc = 0;
        try {
            switch (check) {
                case "produce-fetch" -> d.produceFetch();
                case "group" -> d.group(assignor, pending.get(0));
                case "commit-resume" -> d.commitResume(args.get("phase"), Path.of(args.get("state")));
                case "idempotent" -> d.idempotent();
                case "transactions" -> d.transactions();
                case "eos-failover" -> new EosFailover(d, args).run();
                case "security" -> new SecurityCheck(d, args).run();
                case "share" -> new ShareCheck(d).run();
                case "admin" -> d.emit("admin", "n/a",
                        "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)");
                default -> throw new IllegalArgumentException("unknown check " + check);
            }
        } catch (Exception e) {
            e.printStackTrace();
            for (String c : pending) {
                if (!d.emitted.contains(c)) {
                    d.emit(c, "fail", "driver error: " + e);
                }
            }
            rc = 1;
        }
        System.out.flush();
        // client threads (metadata, heartbeat) must not keep the JVM alive
        System.exit(rc);
    }

    // -- result lines -------------------------------------------------------

    void emit(String check, String result, String detail) {
        System.out.println("{\"client\": " + json(CLIENT) + ", \"version\": " + json(AppInfoParser.getVersion())
                + ", \"check\": " + json(check) + ", \"result\": " + json(result)
                + ", \"detail\": " + json(detail) + "}");
        System.out.flush();
        emitted.add(check);
    }

    void verdict(String check, List<String> problems, String okDetail) {
        if (problems.isEmpty()) {
            emit(check, "pass", okDetail);
        } else {
            String d = String.join("; ", problems);
            emit(check, "fail", d.length() > 2000 ? d.substring(0, 2000) : d);
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    static void log(String msg) {
        System.err.printf("[%tT] %s%n", System.currentTimeMillis(), msg);
    }

    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 10);
    }

    // -- messages and verification -------------------------------------------

    record Rec(int p, long o, String v) { }

    record Pos(int p, long o) { }

    static byte[] key(int i) {
        return ("key-" + i).getBytes(StandardCharsets.UTF_8);
    }

    static byte[] value(String tag, int i) {
        return String.format("%s-%07d", tag, i).getBytes(StandardCharsets.UTF_8);
    }

    static int valueIndex(String tag, String v) {
        int cut = v.lastIndexOf('-');
        if (cut < 0 || !v.substring(0, cut).equals(tag)) {
            return -1;
        }
        try {
            return Integer.parseInt(v.substring(cut + 1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static List<String> verifyAcks(int n, Map<Integer, Pos> acks, List<String> errors) {
        List<String> problems = new ArrayList<>();
        if (!errors.isEmpty()) {
            problems.add(errors.size() + " delivery errors, first: " + errors.get(0));
        }
        if (acks.size() != n) {
            problems.add(acks.size() + " of " + n + " acknowledged");
        }
        if (new HashSet<>(acks.values()).size() != acks.size()) {
            problems.add("two messages acknowledged at the same partition/offset");
        }
        if (acks.values().stream().anyMatch(a -> a.p() < 0 || a.o() < 0)) {
            problems.add("acks without partition/offset");
        }
        return problems;
    }

    static List<String> verifyReadBack(String tag, int n, List<Rec> recs, Map<Integer, Pos> acks) {
        List<String> problems = new ArrayList<>();
        Map<Integer, Pos> seen = new HashMap<>();
        Map<Integer, TreeMap<Long, Integer>> byPart = new TreeMap<>();
        int dups = 0;
        int foreign = 0;
        for (Rec r : recs) {
            int i = valueIndex(tag, r.v());
            if (i < 0 || i >= n) {
                foreign++;
            } else if (seen.putIfAbsent(i, new Pos(r.p(), r.o())) != null) {
                dups++;
            } else {
                byPart.computeIfAbsent(r.p(), k -> new TreeMap<>()).put(r.o(), i);
            }
        }
        if (foreign > 0) {
            problems.add(foreign + " records that are not ours");
        }
        if (dups > 0) {
            problems.add(dups + " duplicates");
        }
        if (seen.size() != n) {
            problems.add("read " + seen.size() + " of " + n);
        }
        byPart.forEach((p, byOffset) -> {
            List<Integer> seq = new ArrayList<>(byOffset.values());
            List<Integer> sorted = new ArrayList<>(seq);
            sorted.sort(null);
            if (!seq.equals(sorted)) {
                problems.add("partition " + p + ": produce order not kept");
            }
        });
        long moved = seen.entrySet().stream().filter(e -> !e.getValue().equals(acks.get(e.getKey()))).count();
        if (moved > 0) {
            problems.add(moved + " records not at their acked position");
        }
        return problems;
    }

    static boolean waitStable(BooleanSupplier cond, long timeoutMs, long holdMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        long since = -1;
        while (System.currentTimeMillis() < deadline) {
            if (cond.getAsBoolean()) {
                since = since < 0 ? System.currentTimeMillis() : since;
                if (System.currentTimeMillis() - since >= holdMs) {
                    return true;
                }
            } else {
                since = -1;
            }
            Thread.sleep(100);
        }
        return false;
    }

    // -- client plumbing -------------------------------------------------------

    Properties props(Object... kv) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(common);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
        return p;
    }

    void createTopic(String topic, int partitions) throws Exception {
        createTopic(topic, partitions, (short) 1);
    }

    void createTopic(String topic, int partitions, short replicationFactor) throws Exception {
        try (Admin admin = Admin.create(props())) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicationFactor)))
                    .all().get(stageMs, TimeUnit.MILLISECONDS);
        }
    }

    /** Produces n keyed messages (acks=all, the client's defaults otherwise: idempotent). */
    Map<Integer, Pos> produce(String topic, int n, List<String> errors, Object... extra) throws Exception {
        Map<Integer, Pos> acks = new ConcurrentHashMap<>();
        List<String> errs = java.util.Collections.synchronizedList(errors);
        Properties p = props("acks", "all", "linger.ms", "5",
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName());
        for (int i = 0; i + 1 < extra.length; i += 2) {
            p.put(extra[i], extra[i + 1]);
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                final int idx = i;
                producer.send(new ProducerRecord<>(topic, key(i), value(topic, i)), (md, e) -> {
                    if (e != null) {
                        errs.add("i=" + idx + ": " + e);
                    } else {
                        acks.put(idx, new Pos(md.partition(), md.offset()));
                    }
                });
            }
            producer.flush();
        }
        return new HashMap<>(acks);
    }

    KafkaConsumer<byte[], byte[]> consumer(Object... kv) {
        Properties p = props("key.deserializer", ByteArrayDeserializer.class.getName(),
                "value.deserializer", ByteArrayDeserializer.class.getName(),
                "enable.auto.commit", "false", "auto.offset.reset", "earliest");
        for (int i = 0; i + 1 < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
        return new KafkaConsumer<>(p);
    }

    /** Polls until done(records) or the stage timeout; max > 0 stops exactly at max records. */
    List<Rec> pollUntil(KafkaConsumer<byte[], byte[]> c, Predicate<List<Rec>> done, int max) {
        List<Rec> recs = new ArrayList<>();
        long deadline = System.currentTimeMillis() + stageMs;
        while (!done.test(recs) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                if (max > 0 && recs.size() >= max) {
                    break;
                }
                recs.add(new Rec(r.partition(), r.offset(), new String(r.value(), StandardCharsets.UTF_8)));
            }
        }
        return recs;
    }

    List<Rec> readAssigned(String topic, int partitions, int n) {
        try (KafkaConsumer<byte[], byte[]> c = consumer()) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            return pollUntil(c, rs -> rs.size() >= n, 0);
        }
    }

    static Map<Integer, Integer> partitionCounts(List<Rec> recs) {
        Map<Integer, Integer> counts = new TreeMap<>();
        recs.forEach(r -> counts.merge(r.p(), 1, Integer::sum));
        return counts;
    }

    // -- checks ----------------------------------------------------------------

    void produceFetch() throws Exception {
        String topic = unique("compat-produce");
        createTopic(topic, PRODUCE_PARTITIONS);
        List<String> errors = new ArrayList<>();
        Map<Integer, Pos> acks = produce(topic, messages, errors);
        verdict("produce", verifyAcks(messages, acks, errors),
                messages + " acked (acks=all, client defaults: idempotent)");
        List<Rec> recs = readAssigned(topic, PRODUCE_PARTITIONS, messages);
        verdict("fetch", verifyReadBack(topic, messages, recs, acks),
                recs.size() + " read back via assign(), per partition " + partitionCounts(recs)
                        + ", order and offsets as acked");
    }

    void idempotent() throws Exception {
        String topic = unique("compat-idempotent");
        createTopic(topic, PRODUCE_PARTITIONS);
        List<String> errors = new ArrayList<>();
        Map<Integer, Pos> acks = produce(topic, messages, errors, "enable.idempotence", "true");
        List<String> problems = verifyAcks(messages, acks, errors);
        if (problems.isEmpty()) {
            problems = verifyReadBack(topic, messages, readAssigned(topic, PRODUCE_PARTITIONS, messages), acks);
        }
        verdict("idempotent", problems,
                "enable.idempotence=true: " + messages + " acked and read back once, in order");
    }

    /** Values read from all partitions of topic from the beginning: until want, then a quiet second. */
    List<String> readAll(String topic, int want, String isolation) {
        try (KafkaConsumer<byte[], byte[]> c = consumer("isolation.level", isolation)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PRODUCE_PARTITIONS; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            List<Rec> recs = pollUntil(c, rs -> rs.size() >= want, 0);
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofSeconds(1))) {
                recs.add(new Rec(r.partition(), r.offset(), new String(r.value(), StandardCharsets.UTF_8)));
            }
            List<String> values = new ArrayList<>();
            recs.forEach(r -> values.add(r.v()));
            return values;
        }
    }

    KafkaProducer<byte[], byte[]> transactionalProducer(String id) {
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props("transactional.id", id, "linger.ms", "5",
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName()));
        p.initTransactions();
        return p;
    }

    /**
     * Committed and aborted transactions, then consume-transform-produce with the consumer's
     * offsets committed in the producer's transactions (sendOffsetsToTransaction with the
     * group's metadata, EOS v2): every committed input exactly once in the output.
     */
    void transactions() throws Exception {
        String src = unique("compat-txn-in"), dst = unique("compat-txn-out");
        createTopic(src, PRODUCE_PARTITIONS);
        createTopic(dst, PRODUCE_PARTITIONS);
        String abortedTag = src + "-aborted";
        int aborted = Math.max(messages / 2, 1);
        try (KafkaProducer<byte[], byte[]> p = transactionalProducer(unique("compat-txn"))) {
            p.beginTransaction();
            for (int i = 0; i < messages; i++) {
                p.send(new ProducerRecord<>(src, key(i), value(src, i)));
            }
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < aborted; i++) {
                p.send(new ProducerRecord<>(src, key(i), value(abortedTag, i)));
            }
            p.flush();
            p.abortTransaction();
        }
        String group = unique("compat-txn-group");
        int processed = 0, transactions = 0;
        Map<TopicPartition, OffsetAndMetadata> committed;
        try (KafkaConsumer<byte[], byte[]> c = consumer("group.id", group, "isolation.level", "read_committed");
                KafkaProducer<byte[], byte[]> p = transactionalProducer(unique("compat-ctp"))) {
            c.subscribe(List.of(src));
            long deadline = System.currentTimeMillis() + stageMs;
            while (processed < messages && System.currentTimeMillis() < deadline) {
                var batch = c.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    byte[] out = ("out-" + new String(r.value(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    p.send(new ProducerRecord<>(dst, r.key(), out));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    processed++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
                transactions++;
            }
            Set<TopicPartition> all = new HashSet<>();
            for (int i = 0; i < PRODUCE_PARTITIONS; i++) {
                all.add(new TopicPartition(src, i));
            }
            committed = c.committed(all, Duration.ofMillis(stageMs));
        }
        List<String> problems = new ArrayList<>();
        List<String> inCommitted = readAll(src, messages, "read_committed");
        List<String> inAll = readAll(src, messages + aborted, "read_uncommitted");
        List<String> out = readAll(dst, messages, "read_committed");
        long leaked = inCommitted.stream().filter(v -> v.startsWith(abortedTag)).count();
        if (leaked > 0) {
            problems.add("read_committed saw " + leaked + " aborted records");
        }
        if (inCommitted.size() - leaked != messages) {
            problems.add("read_committed saw " + (inCommitted.size() - leaked) + " committed input records, want " + messages);
        }
        if (inAll.stream().noneMatch(v -> v.startsWith(abortedTag))) {
            problems.add("read_uncommitted saw no aborted record: the abort was not written");
        }
        Set<String> expected = new TreeSet<>();
        for (int i = 0; i < messages; i++) {
            expected.add("out-" + new String(value(src, i), StandardCharsets.UTF_8));
        }
        Set<String> got = new TreeSet<>(out);
        if (got.size() != out.size()) {
            problems.add((out.size() - got.size()) + " duplicate records in the output");
        }
        if (!got.equals(expected)) {
            Set<String> missing = new TreeSet<>(expected);
            missing.removeAll(got);
            problems.add("output: " + missing.size() + " missing, " + (got.size() - (expected.size() - missing.size())) + " unexpected");
        }
        int lag = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer("isolation.level", "read_committed")) {
            List<TopicPartition> tps = new ArrayList<>(committed.keySet());
            c.assign(tps);
            for (TopicPartition tp : tps) {
                OffsetAndMetadata o = committed.get(tp);
                if (o == null) {
                    c.seekToBeginning(List.of(tp));
                } else {
                    c.seek(tp, o.offset());
                }
            }
            lag = c.poll(Duration.ofSeconds(2)).count();
        }
        if (lag != 0) {
            problems.add("the group's committed offsets leave " + lag + " committed records to re-read");
        }
        if (processed != messages) {
            problems.add("consume-transform-produce processed " + processed + " of " + messages);
        }
        verdict("transactions", problems, messages + " committed + " + aborted + " aborted; read_committed saw "
                + inCommitted.size() + ", read_uncommitted " + inAll.size() + "; " + messages
                + " transformed once in " + transactions + " transactions with sendOffsetsToTransaction; lag after " + lag);
    }

    /** One group member: its consumer lives on its own thread; assigned() is the latest assignment(). */
    final class Member {
        final Thread thread;
        volatile Set<Integer> assigned = Set.of();
        volatile boolean stop;
        volatile String error;

        Member(String group, String topic, String assignor) {
            String strategy = switch (assignor) {
                case "range" -> RangeAssignor.class.getName();
                case "roundrobin" -> RoundRobinAssignor.class.getName();
                case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
                default -> null; // the client's default: [RangeAssignor, CooperativeStickyAssignor]
            };
            thread = new Thread(() -> {
                KafkaConsumer<byte[], byte[]> c = strategy == null
                        ? consumer("group.id", group)
                        : consumer("group.id", group, "partition.assignment.strategy", strategy);
                try (c) {
                    c.subscribe(List.of(topic));
                    while (!stop) {
                        c.poll(Duration.ofMillis(200));
                        Set<Integer> now = new TreeSet<>();
                        c.assignment().forEach(tp -> now.add(tp.partition()));
                        assigned = now;
                    }
                } catch (Exception e) {
                    error = e.toString();
                } finally {
                    assigned = Set.of();
                }
            });
            thread.setDaemon(true);
            thread.start();
        }

        void close() throws InterruptedException {
            stop = true;
            thread.join(30_000);
        }
    }

    static boolean splitOk(List<Member> members, int per, int partitions) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            Set<Integer> a = m.assigned;
            if (a.size() != per) {
                return false;
            }
            total += a.size();
            union.addAll(a);
        }
        return total == partitions && union.size() == partitions;
    }

    static String describeSplit(List<Member> members) {
        StringBuilder b = new StringBuilder();
        for (Member m : members) {
            b.append(b.length() > 0 ? " " : "").append(m.assigned.toString().replace(" ", ""));
        }
        return b.toString();
    }

    void group(String assignor, String checkName) throws Exception {
        String topic = unique("compat-group");
        String group = unique("compat-group");
        createTopic(topic, GROUP_PARTITIONS);
        List<Member> members = new ArrayList<>();
        List<String> stages = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        try {
            String[][] plan = {{"3 members", "2", "join3"}, {"1 left", "3", "leave"}, {"1 joined", "2", "join"}};
            for (String[] st : plan) {
                switch (st[2]) {
                    case "join3" -> {
                        for (int k = 0; k < 3; k++) {
                            members.add(new Member(group, topic, assignor));
                        }
                    }
                    case "leave" -> members.remove(0).close();
                    default -> members.add(new Member(group, topic, assignor));
                }
                int per = Integer.parseInt(st[1]);
                long t0 = System.currentTimeMillis();
                boolean ok = waitStable(() -> splitOk(members, per, GROUP_PARTITIONS), stageMs, 1000);
                stages.add(String.format("%s: %s after %.1fs", st[0], describeSplit(members),
                        (System.currentTimeMillis() - t0) / 1000.0));
                log(stages.get(stages.size() - 1));
                if (!ok) {
                    problems.add(st[0] + ": wanted " + per + " each within " + stageMs / 1000 + "s, have "
                            + describeSplit(members));
                    members.stream().filter(m -> m.error != null).forEach(m -> problems.add("client error: " + m.error));
                    break;
                }
            }
        } finally {
            for (Member m : members) {
                m.close();
            }
        }
        verdict(checkName, problems, String.join("; ", stages));
    }

    void commitResume(String phase, Path state) throws Exception {
        if ("a".equals(phase)) {
            resumePhaseA(state);
            return;
        }
        Map<String, String> s = readState(state);
        String topic = s.get("topic");
        Map<Integer, Long> committed = parseMap(s.get("committed"));
        Map<Integer, Long> end = parseMap(s.get("end_offsets"));
        Set<Pos> consumedA = new HashSet<>();
        Matcher m = Pattern.compile("(\\d+):(\\d+)").matcher(s.get("consumed"));
        while (m.find()) {
            consumedA.add(new Pos(Integer.parseInt(m.group(1)), Long.parseLong(m.group(2))));
        }
        Map<Integer, Long> start = new HashMap<>();
        end.keySet().forEach(p -> start.put(p, committed.getOrDefault(p, 0L)));
        List<Rec> recs;
        try (KafkaConsumer<byte[], byte[]> c = consumer("group.id", s.get("group"))) {
            c.subscribe(List.of(topic));
            recs = pollUntil(c, rs -> {
                Map<Integer, Long> high = new HashMap<>(start);
                rs.forEach(r -> high.merge(r.p(), r.o() + 1, Math::max));
                return end.entrySet().stream().allMatch(e -> high.get(e.getKey()) >= e.getValue());
            }, 0);
        }
        List<String> problems = new ArrayList<>();
        Map<Integer, Long> first = new HashMap<>();
        Set<Pos> got = new HashSet<>();
        for (Rec r : recs) {
            first.putIfAbsent(r.p(), r.o());
            got.add(new Pos(r.p(), r.o()));
        }
        start.forEach((p, c) -> {
            if (c < end.get(p) && !Long.valueOf(c).equals(first.get(p))) {
                problems.add("partition " + p + ": committed " + c + ", first read " + first.get(p));
            }
        });
        long reread = got.stream().filter(consumedA::contains).count();
        if (reread > 0) {
            problems.add(reread + " records re-read that phase a had committed");
        }
        long missing = 0;
        for (var e : end.entrySet()) {
            for (long o = start.get(e.getKey()); o < e.getValue(); o++) {
                missing += got.contains(new Pos(e.getKey(), o)) ? 0 : 1;
            }
        }
        if (missing > 0) {
            problems.add(missing + " uncommitted records not read");
        }
        if (got.size() != recs.size()) {
            problems.add((recs.size() - got.size()) + " duplicate deliveries in phase b");
        }
        verdict("commit-resume", problems,
                "resumed after broker restart at " + committed + ", read the other " + recs.size());
    }

    void resumePhaseA(Path state) throws Exception {
        String topic = unique("compat-resume");
        String group = unique("compat-resume");
        createTopic(topic, PRODUCE_PARTITIONS);
        List<String> errors = new ArrayList<>();
        Map<Integer, Pos> acks = produce(topic, messages, errors);
        List<String> problems = verifyAcks(messages, acks, errors);
        if (!problems.isEmpty()) {
            emit("commit-resume", "fail", "phase a produce: " + String.join("; ", problems));
            return;
        }
        int half = messages / 2;
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        Map<Integer, Long> committed = new TreeMap<>();
        List<Rec> recs;
        try (KafkaConsumer<byte[], byte[]> c = consumer("group.id", group)) {
            c.subscribe(List.of(topic));
            recs = pollUntil(c, rs -> rs.size() >= half, half);
            if (recs.size() != half) {
                emit("commit-resume", "fail", "phase a consumed " + recs.size() + " of " + half);
                return;
            }
            recs.forEach(r -> offsets.put(new TopicPartition(topic, r.p()), new OffsetAndMetadata(r.o() + 1)));
            c.commitSync(offsets, Duration.ofMillis(stageMs));
            Map<TopicPartition, OffsetAndMetadata> fetched = c.committed(offsets.keySet(), Duration.ofMillis(stageMs));
            for (var e : offsets.entrySet()) {
                OffsetAndMetadata f = fetched.get(e.getKey());
                if (f == null || f.offset() != e.getValue().offset()) {
                    emit("commit-resume", "fail", "committed " + offsets + ", OffsetFetch says " + fetched);
                    return;
                }
                committed.put(e.getKey().partition(), e.getValue().offset());
            }
        }
        Map<Integer, Long> end = new TreeMap<>();
        acks.values().forEach(a -> end.merge(a.p(), a.o() + 1, Math::max));
        StringBuilder consumed = new StringBuilder();
        recs.forEach(r -> consumed.append(r.p()).append(':').append(r.o()).append(' '));
        Files.writeString(state, "topic=" + topic + "\ngroup=" + group + "\ncommitted=" + committed
                + "\nend_offsets=" + end + "\nconsumed=" + consumed + "\n");
        log("phase a: consumed " + recs.size() + ", committed " + committed);
    }

    static Map<String, String> readState(Path state) throws Exception {
        Map<String, String> s = new HashMap<>();
        for (String line : Files.readAllLines(state)) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                s.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return s;
    }

    /** Parses Map.toString() of Integer -> Long, e.g. "{0=185, 2=315}". */
    static Map<Integer, Long> parseMap(String s) {
        Map<Integer, Long> m = new TreeMap<>();
        Matcher mt = Pattern.compile("(\\d+)=(\\d+)").matcher(s);
        while (mt.find()) {
            m.put(Integer.parseInt(mt.group(1)), Long.parseLong(mt.group(2)));
        }
        return m;
    }
}
