package chronik.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The {@code share} check (compat/README.md) with the Java client's KafkaShareConsumer (KIP-932):
 * the group's share.auto.offset.reset is set to earliest (Admin.incrementalAlterConfigs on the
 * GROUP resource), two share consumers (share.acknowledgement.mode=explicit) join, N records are
 * produced (acks=all) and each consumer acknowledges every record it is handed as the plan says
 * (ACCEPT, one RELEASE on its first delivery, one REJECT), then commitSync. The Java twin of the Go
 * driver's share check (compat/driver/share.go) and compat_common.verify_share: the same plan,
 * names and verdict.
 */
final class ShareCheck {
    static final int CONSUMERS = 2;
    static final long QUIET_MS = 2000;
    static final String LOCK_MS = "15000";

    /** One record a consumer was handed: which consumer, the message index (-1: not ours), where, the delivery count, the ack. */
    record Delivery(int consumer, int index, Driver.Pos at, int count, AcknowledgeType ack) { }

    private final Driver d;
    private final int n;
    private final int release;
    private final int reject;
    private final String topic = Driver.unique("compat-share");
    private final String group = Driver.unique("compat-share");
    private final List<Delivery> deliveries = Collections.synchronizedList(new ArrayList<>());
    private final List<String> ackErrors = Collections.synchronizedList(new ArrayList<>());
    private final List<String> consumerErrors = Collections.synchronizedList(new ArrayList<>());
    private volatile boolean stop;

    ShareCheck(Driver d) {
        if (d.messages < 4) {
            throw new IllegalArgumentException("share needs --messages >= 4, got " + d.messages);
        }
        this.d = d;
        this.n = d.messages;
        this.release = n / 2;
        this.reject = n / 3;
    }

    /** The acknowledgement for message i on its count-th delivery. */
    AcknowledgeType ackFor(int i, int count) {
        if (i == reject) {
            return AcknowledgeType.REJECT;
        }
        return i == release && count <= 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
    }

    boolean done() {
        synchronized (deliveries) {
            return deliveries.stream().filter(x -> x.ack() == AcknowledgeType.ACCEPT && x.index() >= 0)
                    .map(Delivery::index).distinct().count() >= n - 1;
        }
    }

    void run() throws Exception {
        long started = System.currentTimeMillis();
        d.createTopic(topic, Driver.PRODUCE_PARTITIONS);
        try (Admin admin = Admin.create(d.props())) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", LOCK_MS), AlterConfigOp.OpType.SET))))
                    .all().get(d.stageMs, TimeUnit.MILLISECONDS);
        }
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < CONSUMERS; c++) {
            final int id = c;
            Thread t = new Thread(() -> consume(id), "share-consumer-" + (c + 1));
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        // both members in the group with partitions before the records come
        List<String> problems = new ArrayList<>();
        long waitStarted = System.currentTimeMillis();
        String lastSeen = waitAssigned();
        boolean assigned = lastSeen == null;
        double assignedIn = (System.currentTimeMillis() - waitStarted) / 1000.0;
        if (!assigned) {
            problems.add("describeShareGroups did not show " + CONSUMERS + " members each assigned partitions of "
                    + topic + " at the assignment epoch within " + d.stageMs / 1000 + "s (last: " + lastSeen + ")");
        }
        List<String> errors = new ArrayList<>();
        Map<Integer, Driver.Pos> acks = d.produce(topic, n, errors);
        List<String> produceProblems = Driver.verifyAcks(n, acks, errors);
        produceProblems.forEach(p -> problems.add("produce: " + p));
        double produced = (System.currentTimeMillis() - started) / 1000.0;
        long deadline = System.currentTimeMillis() + d.stageMs;
        while (produceProblems.isEmpty() && !done() && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        boolean finished = done();
        if (finished) {
            Thread.sleep(QUIET_MS);
        }
        stop = true;
        for (Thread t : threads) {
            t.join(d.stageMs + 30_000);
            if (t.isAlive()) {
                problems.add(t.getName() + " did not close within the stage timeout");
            }
        }
        List<Delivery> ds;
        synchronized (deliveries) {
            ds = new ArrayList<>(deliveries);
        }
        if (!finished) {
            problems.add("not every record accepted within " + d.stageMs / 1000 + "s");
        }
        problems.addAll(verify(ds, acks));
        consumerErrors.forEach(e -> problems.add("consumer: " + e));
        String summary = summary(ds);
        if (!problems.isEmpty()) {
            problems.add("(" + summary + ")");
        }
        d.verdict("share", problems, String.format(
                "share group %s (share.auto.offset.reset=earliest set by Admin.incrementalAlterConfigs on the GROUP "
                        + "resource), %d KafkaShareConsumers, each assigned partitions at the assignment epoch "
                        + "(Admin.describeShareGroups) "
                        + "after %.1fs; %d produced (acks=all) to %d partitions by %.1fs; "
                        + "share.acknowledgement.mode=explicit, acknowledge + commitSync, no acknowledgement error: "
                        + "%s; each record accepted once, the released one on its return, the rejected one never back "
                        + "(%ds quiet after); %.1fs in all",
                group, CONSUMERS, assignedIn, n, Driver.PRODUCE_PARTITIONS, produced, summary, QUIET_MS / 1000,
                (System.currentTimeMillis() - started) / 1000.0));
    }

    /**
     * Waits (the stage timeout) until describeShareGroups shows CONSUMERS members of the group, each
     * assigned partitions of the topic and each at the group's target assignment epoch (it has
     * heartbeated since the last reassignment, so the client has its assignment: a member still
     * fetching a partition taken from it fails its acknowledgements of it, NOT_LEADER_OR_FOLLOWER
     * from the client itself): null once it does, else what it saw last.
     */
    String waitAssigned() throws InterruptedException {
        long deadline = System.currentTimeMillis() + d.stageMs;
        String last = "nothing";
        try (Admin admin = Admin.create(d.props())) {
            while (System.currentTimeMillis() < deadline) {
                try {
                    ShareGroupDescription g = admin.describeShareGroups(List.of(group)).describedGroups().get(group)
                            .get(5, TimeUnit.SECONDS);
                    List<String> each = new ArrayList<>();
                    int ready = 0;
                    for (ShareMemberDescription m : g.members()) {
                        long parts = m.assignment().topicPartitions().stream()
                                .filter(tp -> tp.topic().equals(topic)).count();
                        each.add(parts + "@" + m.memberEpoch());
                        ready += parts > 0 && m.memberEpoch() == g.targetAssignmentEpoch() ? 1 : 0;
                    }
                    last = "state " + g.groupState() + ", assignment epoch " + g.targetAssignmentEpoch() + ", "
                            + each.size() + " members, partitions@epoch each " + each;
                    if (each.size() == CONSUMERS && ready == CONSUMERS) {
                        return null;
                    }
                } catch (ExecutionException | TimeoutException e) {
                    last = e.toString();
                }
                Thread.sleep(100);
            }
        }
        return last;
    }

    /** Consumer id polls until stop, acknowledging each record as planned, commitSync after each poll; then close. */
    void consume(int id) {
        Map<String, Object> conf = new HashMap<>();
        d.props().forEach((k, v) -> conf.put((String) k, v));
        conf.put("group.id", group);
        conf.put("share.acknowledgement.mode", "explicit");
        conf.put("max.poll.records", "50");
        conf.put("key.deserializer", ByteArrayDeserializer.class.getName());
        conf.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaShareConsumer<byte[], byte[]> c = null;
        try {
            c = new KafkaShareConsumer<>(conf);
            c.setAcknowledgementCommitCallback((offsets, e) -> {
                if (e != null) {
                    ackErrors.add("consumer " + (id + 1) + ": " + offsets.keySet() + ": " + e);
                }
            });
            c.subscribe(List.of(topic));
            while (!stop) {
                int got = 0;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    int i = Driver.valueIndex(topic, new String(r.value(), StandardCharsets.UTF_8));
                    i = i >= 0 && i < n ? i : -1;
                    int count = r.deliveryCount().map(Short::intValue).orElse(0);
                    AcknowledgeType ack = ackFor(i, count);
                    c.acknowledge(r, ack);
                    deliveries.add(new Delivery(id, i, new Driver.Pos(r.partition(), r.offset()), count, ack));
                    got++;
                }
                if (got > 0) {
                    Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync(Duration.ofMillis(d.stageMs));
                    result.forEach((tp, e) -> e.ifPresent(x -> ackErrors.add("consumer " + (id + 1) + ": " + tp + ": " + x)));
                }
            }
        } catch (Exception e) {
            Driver.log("share consumer " + (id + 1) + ": " + e);
            consumerErrors.add("consumer " + (id + 1) + ": " + e);
        } finally {
            if (c != null) {
                try {
                    c.close(Duration.ofMillis(d.stageMs)); // leaves the group
                } catch (Exception e) {
                    consumerErrors.add("consumer " + (id + 1) + ": close: " + e);
                }
            }
        }
    }

    /** compat/driver/share.go's VerifyShare: the same problems, in the same words. */
    List<String> verify(List<Delivery> ds, Map<Integer, Driver.Pos> acks) {
        List<String> problems = new ArrayList<>();
        if (!ackErrors.isEmpty()) {
            problems.add(ackErrors.size() + " acknowledgement errors, first: " + ackErrors.get(0));
        }
        Map<Integer, Integer> accepted = new HashMap<>();
        Map<Integer, List<Integer>> countsOf = new HashMap<>();
        int foreign = 0, badCount = 0, moved = 0;
        for (Delivery x : ds) {
            if (x.index() < 0) {
                foreign++;
                continue;
            }
            if (x.count() < 1) {
                badCount++;
            }
            Driver.Pos at = acks.get(x.index());
            if (at != null && !at.equals(x.at())) {
                moved++;
            }
            countsOf.computeIfAbsent(x.index(), k -> new ArrayList<>()).add(x.count());
            if (x.ack() == AcknowledgeType.ACCEPT) {
                accepted.merge(x.index(), 1, Integer::sum);
            }
        }
        if (foreign > 0) {
            problems.add(foreign + " records that are not ours");
        }
        if (badCount > 0) {
            problems.add(badCount + " deliveries with a delivery count below 1");
        }
        if (moved > 0) {
            problems.add(moved + " records not at their acked position");
        }
        List<Integer> missing = new ArrayList<>(), twice = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (i == reject) {
                continue;
            }
            int k = accepted.getOrDefault(i, 0);
            if (k == 0) {
                missing.add(i);
            } else if (k > 1) {
                twice.add(i);
            }
        }
        if (!missing.isEmpty()) {
            problems.add(missing.size() + " of " + (n - 1) + " records never accepted (first "
                    + missing.subList(0, Math.min(5, missing.size())) + ")");
        }
        if (!twice.isEmpty()) {
            problems.add(twice.size() + " records accepted more than once (first "
                    + twice.subList(0, Math.min(5, twice.size())) + ")");
        }
        String rel = counts(countsOf.get(release));
        if (!rel.equals("1,2")) {
            problems.add("released record " + release + ": delivery counts [" + rel + "], want [1,2] "
                    + "(released on the first, accepted on the second)");
        }
        String rej = counts(countsOf.get(reject));
        if (!rej.equals("1")) {
            problems.add("rejected record " + reject + ": delivery counts [" + rej + "], want [1] "
                    + "(a rejected record must not come back)");
        }
        return problems;
    }

    static String counts(List<Integer> cs) {
        List<Integer> sorted = new ArrayList<>(cs == null ? List.of() : cs);
        sorted.sort(null);
        StringBuilder b = new StringBuilder();
        for (int c : sorted) {
            b.append(b.length() > 0 ? "," : "").append(c);
        }
        return b.toString();
    }

    String summary(List<Delivery> ds) {
        int[] perConsumer = new int[CONSUMERS];
        String back = "";
        for (Delivery x : ds) {
            if (x.ack() == AcknowledgeType.ACCEPT) {
                perConsumer[x.consumer()]++;
            }
            if (x.index() == release && x.count() >= 2) {
                back = "consumer " + (x.consumer() + 1);
            }
        }
        Map<Integer, Integer> byConsumer = new TreeMap<>();
        for (int c = 0; c < CONSUMERS; c++) {
            byConsumer.put(c + 1, perConsumer[c]);
        }
        StringBuilder acc = new StringBuilder();
        byConsumer.values().forEach(v -> acc.append(acc.length() > 0 ? "+" : "").append(v));
        return "accepted " + acc + " by the " + CONSUMERS + " consumers (" + ds.size() + " deliveries); record "
                + release + " released, back with delivery count 2 to " + (back.isEmpty() ? "no consumer" : back)
                + "; record " + reject + " rejected";
    }
}
