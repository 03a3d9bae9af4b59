package chronik.compat;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The kafka-streams row of the compatibility matrix (compat/README.md): a Kafka Streams word
 * count with processing.guarantee=exactly_once_v2 — a repartition topic, a compacted changelog,
 * transactions with the consumer's offsets, and DeleteRecords on the repartition topic, all as
 * Kafka Streams drives them. Its `transactions` check passes when the counts a read_committed
 * reader sees on the output topic end at exactly the expected count of every word and never
 * repeat or go back (a duplicate or a lost update would). The other checks are n/a.
 *
 * <p>Run: java -cp 'target/classes:target/lib/*' chronik.compat.StreamsDriver --bootstrap HOST:PORT
 * --check CHECK [--messages N] [--stage-timeout S]
 */
public final class StreamsDriver {
    static final String CLIENT = "kafka-streams (exactly_once_v2)";
    static final int PARTITIONS = 3;
    static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};

    final String bootstrap;
    final int lines;
    final long stageMs;

    StreamsDriver(Map<String, String> args) {
        bootstrap = args.get("bootstrap");
        lines = Integer.parseInt(args.getOrDefault("messages", "1000"));
        stageMs = (long) (Double.parseDouble(args.getOrDefault("stage-timeout", "60")) * 1000);
    }

    public static void main(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String check = args.getOrDefault("check", "");
        String assignor = args.getOrDefault("assignor", "default");
        StreamsDriver d = new StreamsDriver(args);
        String na = "Kafka Streams runs its own consumers and producers; this row checks its "
                + "exactly_once_v2 processing (the transactions column)";
        int rc = 0;
        try {
            switch (check) {
                case "produce-fetch" -> {
                    emit("produce", "n/a", na);
                    emit("fetch", "n/a", na);
                }
                case "group" -> emit(assignor.equals("default") ? "group" : "group:" + assignor, "n/a", na);
                case "commit-resume", "idempotent" -> emit(check, "n/a", na);
                case "admin" -> emit("admin", "n/a",
                        "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)");
                case "transactions" -> d.wordCount();
                default -> throw new IllegalArgumentException("unknown check " + check);
            }
        } catch (Exception e) {
            e.printStackTrace();
            if (check.equals("transactions")) {
                emit("transactions", "fail", "driver error: " + e);
            }
            rc = 1;
        }
        System.out.flush();
        System.exit(rc);
    }

    static void emit(String check, String result, String detail) {
        System.out.println("{\"client\": " + Driver.json(CLIENT) + ", \"version\": "
                + Driver.json(AppInfoParser.getVersion()) + ", \"check\": " + Driver.json(check)
                + ", \"result\": " + Driver.json(result) + ", \"detail\": " + Driver.json(detail) + "}");
        System.out.flush();
    }

    /** Line i: three words picked by i, so every word's count is known. */
    static String line(int i) {
        return WORDS[i % 7] + " " + WORDS[(i / 7) % 7] + " " + WORDS[(i * 3) % 7];
    }

    void wordCount() throws Exception {
        String in = Driver.unique("compat-streams-in"), out = Driver.unique("compat-streams-out");
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(in, PARTITIONS, (short) 1), new NewTopic(out, PARTITIONS, (short) 1)))
                    .all().get(stageMs, TimeUnit.MILLISECONDS);
        }
        Map<String, Long> expected = new TreeMap<>();
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("acks", "all");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < lines; i++) {
                for (String w : line(i).split(" ")) {
                    expected.merge(w, 1L, Long::sum);
                }
                p.send(new ProducerRecord<>(in, "line-" + i, line(i)));
            }
            p.flush();
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(in)
                .flatMapValues(v -> List.of(v.split(" ")))
                .groupBy((k, w) -> w)
                .count(Materialized.as("word-counts"))
                .toStream()
                .mapValues(String::valueOf)
                .to(out, Produced.with(Serdes.String(), Serdes.String()));
        Properties sp = new Properties();
        sp.putAll(common);
        sp.put(StreamsConfig.APPLICATION_ID_CONFIG, Driver.unique("compat-wordcount"));
        sp.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        sp.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        sp.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("compat-streams").toString());
        sp.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        sp.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        sp.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        long started = System.currentTimeMillis();
        Map<String, List<Long>> updates = new TreeMap<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), sp);
        List<Throwable> crashed = new ArrayList<>();
        streams.setUncaughtExceptionHandler(e -> {
            crashed.add(e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        try {
            readCounts(out, expected, updates, crashed);
        } finally {
            streams.close(Duration.ofMillis(stageMs));
            streams.cleanUp();
        }
        List<String> problems = new ArrayList<>();
        crashed.forEach(e -> problems.add("the Streams application died: " + e));
        for (Map.Entry<String, Long> w : expected.entrySet()) {
            List<Long> seen = updates.getOrDefault(w.getKey(), List.of());
            Long last = seen.isEmpty() ? null : seen.get(seen.size() - 1);
            if (!w.getValue().equals(last)) {
                problems.add(w.getKey() + ": last count " + last + ", want " + w.getValue());
            }
            for (int i = 1; i < seen.size(); i++) {
                if (seen.get(i) <= seen.get(i - 1)) {
                    problems.add(w.getKey() + ": count went from " + seen.get(i - 1) + " to " + seen.get(i)
                            + " (a duplicate or lost update)");
                    break;
                }
            }
        }
        int total = updates.values().stream().mapToInt(List::size).sum();
        if (problems.isEmpty()) {
            emit("transactions", "pass", lines + " lines, " + expected.size() + " words counted exactly once ("
                    + expected + ") by a word count with exactly_once_v2 (repartition topic, changelog, "
                    + "transactional commits), " + total + " count updates read with read_committed, "
                    + (System.currentTimeMillis() - started) + " ms");
        } else {
            String d = String.join("; ", problems);
            emit("transactions", "fail", d.length() > 2000 ? d.substring(0, 2000) : d);
        }
    }

    /** Reads the output (read_committed) until every word's count is the expected one or the stage timeout. */
    void readCounts(String out, Map<String, Long> expected, Map<String, List<Long>> updates, List<Throwable> crashed) {
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", Driver.unique("compat-streams-reader"));
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                tps.add(new TopicPartition(out, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 3 * stageMs;
            Map<String, Long> latest = new HashMap<>();
            while (System.currentTimeMillis() < deadline && crashed.isEmpty() && !latest.equals(expected)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    long n = Long.parseLong(r.value());
                    updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(n);
                    latest.put(r.key(), n);
                }
            }
            // anything after the expected counts would be a duplicate: one more quiet second
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofSeconds(1))) {
                updates.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(Long.parseLong(r.value()));
            }
        }
    }
}
