package chronik.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The {@code security} check (compat/README.md) with the Java client: PEM trust and key stores
 * (ssl.truststore.type / ssl.keystore.type PEM; the broker requires a client certificate on
 * every TLS listener) and SASL SCRAM-SHA-512 (ScramLoginModule), against a broker whose
 * StandardAuthorizer grants the SCRAM user and the certificate's subject ALL on a topic and a
 * group prefix only. The Java twin of compat_common.security_check: the same steps, names and
 * verdict.
 */
final class SecurityCheck {
    private static final String[] REQUIRED = {"sasl-bootstrap", "ssl-bootstrap", "ssl-ca", "ssl-cert",
        "ssl-key", "sasl-username", "sasl-password", "topic-prefix", "group-prefix", "denied-topic"};

    private final Driver d;
    private final Map<String, String> args;

    /** A step's outcome: what it found wrong (nothing: it held) and what happened. */
    record Step(List<String> problems, String what) { }

    @FunctionalInterface
    interface StepRun {
        Step run() throws Exception;
    }

    SecurityCheck(Driver d, Map<String, String> args) {
        for (String name : REQUIRED) {
            if (args.get(name) == null) {
                throw new IllegalArgumentException("security needs --" + name);
            }
        }
        this.d = d;
        this.args = args;
    }

    /** A driver whose clients reach listener SASL_SSL (as the SCRAM user with password) or SSL. */
    Driver endpoint(String listener, String password) throws Exception {
        Map<String, String> a = new HashMap<>(args);
        a.put("bootstrap", args.get(listener.equals("SASL_SSL") ? "sasl-bootstrap" : "ssl-bootstrap"));
        Driver e = new Driver(a);
        Properties p = e.common;
        p.put("security.protocol", listener);
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", args.get("ssl-ca"));
        p.put("ssl.keystore.type", "PEM");
        p.put("ssl.keystore.certificate.chain", Files.readString(Path.of(args.get("ssl-cert"))));
        p.put("ssl.keystore.key", Files.readString(Path.of(args.get("ssl-key"))));
        if (listener.equals("SASL_SSL")) {
            p.put("sasl.mechanism", "SCRAM-SHA-512");
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                    + args.get("sasl-username") + "\" password=\"" + password + "\";");
        }
        return e;
    }

    void run() {
        String sasl = "SASL_SSL SCRAM-SHA-512 as " + args.get("sasl-username");
        String denied = args.get("denied-topic");
        String topics = args.get("topic-prefix"), groups = args.get("group-prefix");
        Map<String, StepRun> steps = new LinkedHashMap<>();
        steps.put("(1) " + sasl, () -> produceConsume("SASL_SSL",
                Driver.unique(topics + "sasl"), Driver.unique(groups + "sasl")));
        steps.put("(2) SSL, client certificate required, as its subject", () -> produceConsume("SSL",
                Driver.unique(topics + "mtls"), Driver.unique(groups + "mtls")));
        steps.put("(3) wrong password", this::refusedLogin);
        steps.put("(4) produce to ungranted " + denied + " over " + sasl, () -> deniedProduce("SASL_SSL"));
        steps.put("(4) produce to ungranted " + denied + " over SSL as the certificate", () -> deniedProduce("SSL"));
        boolean failed = false;
        List<String> details = new ArrayList<>();
        for (Map.Entry<String, StepRun> st : steps.entrySet()) {
            long t0 = System.nanoTime();
            Step res;
            try {
                res = st.getValue().run();
            } catch (Exception e) {
                e.printStackTrace();
                res = new Step(List.of("error: " + e), "");
            }
            String took = String.format("%.1fs", (System.nanoTime() - t0) / 1e9);
            if (res.problems().isEmpty()) {
                details.add(st.getKey() + ": " + res.what() + " (" + took + ")");
            } else {
                failed = true;
                details.add(st.getKey() + ": FAILED after " + took + ": " + String.join("; ", res.problems()));
            }
            Driver.log(details.get(details.size() - 1));
        }
        String detail = String.join("; ", details);
        d.emit("security", failed ? "fail" : "pass", detail.length() > 2000 ? detail.substring(0, 2000) : detail);
    }

    /** A new granted topic, n messages produced (acks=all, idempotent), all read back in a new granted group. */
    Step produceConsume(String listener, String topic, String group) throws Exception {
        Driver e = endpoint(listener, args.get("sasl-password"));
        e.createTopic(topic, Driver.PRODUCE_PARTITIONS);
        List<String> errors = new ArrayList<>();
        Map<Integer, Driver.Pos> acks = e.produce(topic, e.messages, errors);
        List<String> problems = Driver.verifyAcks(e.messages, acks, errors);
        if (!problems.isEmpty()) {
            return new Step(problems, "");
        }
        List<Driver.Rec> recs;
        try (KafkaConsumer<byte[], byte[]> c = e.consumer("group.id", group)) {
            c.subscribe(List.of(topic));
            recs = e.pollUntil(c, rs -> rs.size() >= e.messages, 0);
        }
        return new Step(Driver.verifyReadBack(topic, e.messages, recs, acks),
                e.messages + " produced to " + topic + " (acks=all, idempotent), read back by group " + group);
    }

    KafkaProducer<byte[], byte[]> producer(Driver e) {
        // delivery.timeout.ms must cover linger.ms + request.timeout.ms
        return new KafkaProducer<>(e.props("acks", "all", "max.block.ms", String.valueOf(d.stageMs),
                "delivery.timeout.ms", String.valueOf(d.stageMs), "request.timeout.ms", String.valueOf(d.stageMs / 2),
                "key.serializer", ByteArraySerializer.class.getName(),
                "value.serializer", ByteArraySerializer.class.getName()));
    }

    /** The exception a send ends with, from the future or from send() itself; null if it was acknowledged. */
    Throwable sendError(Driver e, String topic) {
        try (KafkaProducer<byte[], byte[]> p = producer(e)) {
            p.send(new ProducerRecord<>(topic, "one".getBytes(StandardCharsets.UTF_8)))
                    .get(d.stageMs, TimeUnit.MILLISECONDS);
            return null;
        } catch (java.util.concurrent.ExecutionException ex) {
            return ex.getCause();
        } catch (Exception ex) {
            return ex;
        }
    }

    /** A wrong password: the producer's first request ends in SaslAuthenticationException. */
    Step refusedLogin() throws Exception {
        Driver e = endpoint("SASL_SSL", "not-" + args.get("sasl-password"));
        Throwable err = sendError(e, Driver.unique(args.get("topic-prefix") + "login"));
        if (!(err instanceof SaslAuthenticationException)) {
            return new Step(List.of("want SaslAuthenticationException, send ended with " + err), "");
        }
        return new Step(List.of(), "refused: " + err);
    }

    /** Producing to the topic no ACL grants ends in TopicAuthorizationException. */
    Step deniedProduce(String listener) throws Exception {
        Throwable err = sendError(endpoint(listener, args.get("sasl-password")), args.get("denied-topic"));
        if (!(err instanceof TopicAuthorizationException)) {
            return new Step(List.of("want TopicAuthorizationException, send ended with " + err), "");
        }
        return new Step(List.of(), "send failed: " + err);
    }
}
