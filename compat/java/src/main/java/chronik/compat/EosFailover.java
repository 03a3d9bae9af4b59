package chronik.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The {@code eos-failover} check: exactly-once consume-transform-produce with the Java client
 * through a broker kill in a 3-node cluster (compat/run.sh starts the cluster and does the kill).
 *
 * <p>A read_committed group member reads an input topic (RF 3); a transactional producer writes
 * each value, prefixed {@code out-}, to an output topic and commits the member's offsets in the same
 * transaction (sendOffsetsToTransaction with the group metadata). A third of the way through it
 * asks the runner to SIGKILL the node leading the output topic's partition 0 (it writes the node
 * id to --kill-request and goes on, so the kill lands mid-transaction; the runner confirms with
 * --kill-done). Whenever a transaction fails the loop does what
 * an EOS application must: abort (or, on a fatal error, replace the producer, which fences the old
 * one) and rewind the consumer to the group's committed offsets. Passes when read_committed sees
 * every input exactly once in the output.
 */
final class EosFailover {
    static final int PARTITIONS = 3;
    static final short REPLICATION = 3;

    private final Driver d;
    private final Path killRequest;
    private final Path killDone;

    EosFailover(Driver d, Map<String, String> args) {
        this.d = d;
        this.killRequest = Path.of(require(args, "kill-request"));
        this.killDone = Path.of(require(args, "kill-done"));
    }

    private static String require(Map<String, String> args, String name) {
        String v = args.get(name);
        if (v == null) {
            throw new IllegalArgumentException("eos-failover needs --" + name);
        }
        return v;
    }

    void run() throws Exception {
        String src = Driver.unique("compat-eos-in"), dst = Driver.unique("compat-eos-out");
        d.createTopic(src, PARTITIONS, REPLICATION);
        d.createTopic(dst, PARTITIONS, REPLICATION);
        int n = d.messages;
        List<String> errors = new ArrayList<>();
        Map<Integer, Driver.Pos> acks = d.produce(src, n, errors, "enable.idempotence", "true");
        List<String> problems = Driver.verifyAcks(n, acks, errors);
        if (!problems.isEmpty()) {
            d.verdict("eos-failover", problems, "");
            return;
        }
        Map<TopicPartition, Long> end = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            end.put(new TopicPartition(src, p), 0L);
        }
        acks.values().forEach(a -> end.merge(new TopicPartition(src, a.p()), a.o() + 1, Math::max));

        String group = Driver.unique("compat-eos-group"), txnId = Driver.unique("compat-eos-txn");
        int transactions = 0, aborted = 0, replaced = 0;
        Integer killed = null;
        long committedRecords = 0;
        long deadline = System.currentTimeMillis() + 4 * d.stageMs;
        boolean done = false;
        try (KafkaConsumer<byte[], byte[]> c = d.consumer("group.id", group, "isolation.level", "read_committed",
                "max.poll.records", "100")) {
            c.subscribe(List.of(src));
            KafkaProducer<byte[], byte[]> p = producer(txnId);
            try {
                while (!done && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofMillis(500));
                    if (batch.isEmpty()) {
                        done = caughtUp(c, end);
                        continue;
                    }
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    try {
                        p.beginTransaction();
                        for (ConsumerRecord<byte[], byte[]> r : batch) {
                            byte[] out = ("out-" + new String(r.value(), StandardCharsets.UTF_8))
                                    .getBytes(StandardCharsets.UTF_8);
                            p.send(new ProducerRecord<>(dst, r.key(), out));
                            offsets.put(new TopicPartition(r.topic(), r.partition()),
                                    new OffsetAndMetadata(r.offset() + 1));
                        }
                        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                        p.commitTransaction();
                        transactions++;
                        committedRecords += batch.count();
                    } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                        // fatal for this producer instance: a new one with the same transactional.id
                        // fences it and completes or aborts what it left open
                        Driver.log("eos: fatal producer error, replacing the producer: " + e);
                        p.close(Duration.ZERO);
                        p = producer(txnId);
                        replaced++;
                        rewind(c);
                    } catch (KafkaException e) {
                        Driver.log("eos: transaction failed, aborting: " + e);
                        aborted++;
                        try {
                            p.abortTransaction();
                        } catch (KafkaException abortFailed) {
                            Driver.log("eos: abort failed, replacing the producer: " + abortFailed);
                            p.close(Duration.ZERO);
                            p = producer(txnId);
                            replaced++;
                        }
                        rewind(c);
                    }
                    if (killed == null && committedRecords >= n / 3) {
                        killed = requestKillOfLeader(new TopicPartition(dst, 0));
                    }
                }
            } finally {
                p.close(Duration.ofSeconds(5));
            }
        }
        if (killed == null) {
            problems.add("the loop never reached the kill point (" + committedRecords + " committed)");
        } else if (!Files.exists(killDone)) {
            problems.add("the runner never confirmed killing node " + killed);
        }
        if (!done) {
            problems.add("the group's committed offsets did not reach the input's end within "
                    + (4 * d.stageMs / 1000) + " s (" + committedRecords + " of " + n + " committed)");
        }
        List<String> out = d.readAll(dst, n, "read_committed");
        Set<String> expected = new TreeSet<>();
        for (int i = 0; i < n; i++) {
            expected.add("out-" + new String(Driver.value(src, i), StandardCharsets.UTF_8));
        }
        Set<String> got = new HashSet<>(out);
        if (got.size() != out.size()) {
            problems.add((out.size() - got.size()) + " duplicate records in the read_committed output");
        }
        Set<String> missing = new TreeSet<>(expected);
        missing.removeAll(got);
        Set<String> unexpected = new TreeSet<>(got);
        unexpected.removeAll(expected);
        if (!missing.isEmpty() || !unexpected.isEmpty()) {
            problems.add("output: " + missing.size() + " missing, " + unexpected.size() + " unexpected");
        }
        d.verdict("eos-failover", problems, n + " inputs (RF 3) each exactly once in the read_committed output after"
                + " node " + killed + " (leader of the output's partition 0) was SIGKILLed a third of the way;"
                + " " + transactions + " committed transactions, " + aborted + " aborted and redone, "
                + replaced + " producer replacements");
    }

    private KafkaProducer<byte[], byte[]> producer(String txnId) {
        KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(d.props("transactional.id", txnId, "linger.ms", "5",
                "transaction.timeout.ms", "60000", "delivery.timeout.ms", "60000", "request.timeout.ms", "10000",
                "max.block.ms", String.valueOf(2 * d.stageMs),
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName()));
        p.initTransactions();
        return p;
    }

    /** Every partition's position and committed offset at the input's end. */
    private boolean caughtUp(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> end) {
        if (!c.assignment().containsAll(end.keySet())) {
            return false;
        }
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(end.keySet(), Duration.ofMillis(d.stageMs));
        return end.entrySet().stream().allMatch(e -> {
            OffsetAndMetadata o = committed.get(e.getKey());
            return o != null && o.offset() >= e.getValue();
        });
    }

    /** Back to the group's committed offsets: what the failed transaction read is read again. */
    private void rewind(KafkaConsumer<byte[], byte[]> c) {
        Set<TopicPartition> assigned = c.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(assigned, Duration.ofMillis(d.stageMs));
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) {
                c.seekToBeginning(List.of(tp));
            } else {
                c.seek(tp, o.offset());
            }
        }
    }

    /**
     * Asks the runner to SIGKILL tp's leader and returns its node id at once: the loop goes on, so
     * the kill lands while the next transactions are in flight.
     */
    private int requestKillOfLeader(TopicPartition tp) throws Exception {
        int leader;
        try (Admin admin = Admin.create(d.props())) {
            TopicDescription desc = admin.describeTopics(List.of(tp.topic())).allTopicNames()
                    .get(d.stageMs, TimeUnit.MILLISECONDS).get(tp.topic());
            leader = desc.partitions().get(tp.partition()).leader().id();
        }
        Path tmp = killRequest.resolveSibling(killRequest.getFileName() + ".tmp");
        Files.writeString(tmp, leader + "\n");
        Files.move(tmp, killRequest, StandardCopyOption.ATOMIC_MOVE);
        Driver.log("eos: asked the runner to kill node " + leader);
        return leader;
    }
}
