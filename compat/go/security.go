// The security check (compat/README.md) through franz-go: TLS from
// crypto/tls (CA, client certificate: the broker requires one on every TLS
// listener) and SASL SCRAM-SHA-512 from franz-go's sasl/scram, against a
// broker whose StandardAuthorizer grants the SCRAM user and the certificate's
// subject ALL on a topic and a group prefix only. The Go twin of
// compat_common.security_check: the same steps, names and verdict. Owns only
// the franz-go calls; the checks on what came back live in
// compat/driver (verify.go).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"chronik/compat/driver"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securityArgs: where the secured broker listens and who the driver is there.
type securityArgs struct {
	saslBootstrap, sslBootstrap string
	ca, cert, key               string
	username, password          string
	topicPrefix, groupPrefix    string
	deniedTopic                 string
}

// missing names the flags the security check needs and was not given.
func (s securityArgs) missing() []string {
	var out []string
	for _, f := range []struct{ name, v string }{
		{"sasl-bootstrap", s.saslBootstrap}, {"ssl-bootstrap", s.sslBootstrap}, {"ssl-ca", s.ca},
		{"ssl-cert", s.cert}, {"ssl-key", s.key}, {"sasl-username", s.username}, {"sasl-password", s.password},
		{"topic-prefix", s.topicPrefix}, {"group-prefix", s.groupPrefix}, {"denied-topic", s.deniedTopic},
	} {
		if f.v == "" {
			out = append(out, "-"+f.name)
		}
	}
	return out
}

// stepResult: what a step found wrong (nothing: it held) and what happened.
type stepResult struct {
	problems []string
	what     string
}

// endpoint returns a copy of a that reaches listener "SASL_SSL" (as the SCRAM
// user with password) or "SSL" (as the client certificate).
func endpoint(a args, listener, password string) (args, error) {
	s := a.sec
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(s.ca)
	if err != nil {
		return a, err
	}
	if !pool.AppendCertsFromPEM(pem) {
		return a, fmt.Errorf("no certificate in %s", s.ca)
	}
	pair, err := tls.LoadX509KeyPair(s.cert, s.key)
	if err != nil {
		return a, err
	}
	tlsConfig := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	out := a
	out.extra = []kgo.Opt{kgo.DialTLSConfig(tlsConfig)}
	out.Bootstrap = s.sslBootstrap
	if listener == "SASL_SSL" {
		out.Bootstrap = s.saslBootstrap
		out.extra = append(out.extra, kgo.SASL(scram.Auth{User: s.username, Pass: password}.AsSha512Mechanism()))
	}
	return out, nil
}

func checkSecurity(rep *driver.Reporter, a args) error {
	if m := a.sec.missing(); len(m) > 0 {
		return fmt.Errorf("-check security needs %s", strings.Join(m, ", "))
	}
	s := a.sec
	sasl := "SASL_SSL SCRAM-SHA-512 as " + s.username
	steps := []struct {
		name string
		run  func() (stepResult, error)
	}{
		{"(1) " + sasl, func() (stepResult, error) {
			return secureProduceConsume(a, "SASL_SSL", driver.Unique(s.topicPrefix+"sasl"), driver.Unique(s.groupPrefix+"sasl"))
		}},
		{"(2) SSL, client certificate required, as its subject", func() (stepResult, error) {
			return secureProduceConsume(a, "SSL", driver.Unique(s.topicPrefix+"mtls"), driver.Unique(s.groupPrefix+"mtls"))
		}},
		{"(3) wrong password", func() (stepResult, error) { return refusedLogin(a) }},
		{fmt.Sprintf("(4) produce to ungranted %s over %s", s.deniedTopic, sasl), func() (stepResult, error) {
			return deniedProduce(a, "SASL_SSL")
		}},
		{fmt.Sprintf("(4) produce to ungranted %s over SSL as the certificate", s.deniedTopic), func() (stepResult, error) {
			return deniedProduce(a, "SSL")
		}},
	}
	failed := false
	var details []string
	for _, st := range steps {
		t0 := time.Now()
		res, err := st.run()
		if err != nil {
			res.problems = append(res.problems, "error: "+err.Error())
		}
		took := fmt.Sprintf("%.1fs", time.Since(t0).Seconds())
		if len(res.problems) > 0 {
			failed = true
			details = append(details, fmt.Sprintf("%s: FAILED after %s: %s", st.name, took, strings.Join(res.problems, "; ")))
		} else {
			details = append(details, fmt.Sprintf("%s: %s (%s)", st.name, res.what, took))
		}
		driver.Logf("%s", details[len(details)-1])
	}
	result, detail := "pass", strings.Join(details, "; ")
	if failed {
		result = "fail"
	}
	if len(detail) > 2000 {
		detail = detail[:2000]
	}
	rep.Emit("security", result, detail)
	return nil
}

// secureProduceConsume: a new granted topic, n messages produced (acks=all,
// idempotent) and all read back by a member of a new granted group.
func secureProduceConsume(a args, listener, topic, group string) (stepResult, error) {
	e, err := endpoint(a, listener, a.sec.password)
	if err != nil {
		return stepResult{}, err
	}
	if err := createTopic(e, topic, driver.ProduceParts); err != nil {
		return stepResult{}, fmt.Errorf("create %s: %w", topic, err)
	}
	acks, errs, err := franz{e}.Produce(topic, a.Messages, true)
	if err != nil {
		return stepResult{}, err
	}
	if p := driver.VerifyAcks(a.Messages, acks, errs); len(p) > 0 {
		return stepResult{problems: p}, nil
	}
	cl, err := groupConsumer(e, group, topic)
	if err != nil {
		return stepResult{}, err
	}
	recs, err := pollUntil(cl, a.Stage, func(rs []driver.Record) bool { return len(rs) >= a.Messages }, 0)
	cl.Close()
	if err != nil {
		return stepResult{}, err
	}
	return stepResult{problems: driver.VerifyReadBack(topic, a.Messages, recs, acks),
		what: fmt.Sprintf("%d produced to %s (acks=all, idempotent), read back by group %s", a.Messages, topic, group)}, nil
}

// refusedLogin: a client with a wrong password gets SASL_AUTHENTICATION_FAILED
// on its first request (franz-go does not retry it beyond one new connection).
func refusedLogin(a args) (stepResult, error) {
	e, err := endpoint(a, "SASL_SSL", "not-"+a.sec.password)
	if err != nil {
		return stepResult{}, err
	}
	cl, err := newClient(e)
	if err != nil {
		return stepResult{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	err = cl.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		return stepResult{problems: []string{fmt.Sprintf("want SASL_AUTHENTICATION_FAILED, Ping returned %v", err)}}, nil
	}
	return stepResult{what: "refused: " + err.Error()}, nil
}

// deniedProduce: producing to the topic no ACL grants fails with TOPIC_AUTHORIZATION_FAILED.
func deniedProduce(a args, listener string) (stepResult, error) {
	e, err := endpoint(a, listener, a.sec.password)
	if err != nil {
		return stepResult{}, err
	}
	cl, err := newClient(e, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return stepResult{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: a.sec.deniedTopic, Value: []byte("denied")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return stepResult{problems: []string{fmt.Sprintf("want TOPIC_AUTHORIZATION_FAILED, produce returned %v", err)}}, nil
	}
	return stepResult{what: "produce failed: " + err.Error()}, nil
}
