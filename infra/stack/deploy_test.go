package stack

// A deployment of the synthesized stack, played on this machine: what
// CloudFormation, Secrets Manager and ECS would do with the template is
// done here from the template itself, so the brokers run exactly as the
// task definition configures them.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/functions/certissuer"
	"github.com/stratamq/strata/functions/kafkaauth"
)

// fakeRegion and fakeAccount stand in for the stack's pseudo parameters.
const (
	fakeRegion  = "us-east-1"
	fakeAccount = "000000000000"
)

// secretARN is the ARN the emulation gives a secret resource.
func secretARN(logicalID string) string {
	return "arn:aws:secretsmanager:" + fakeRegion + ":" + fakeAccount + ":secret:" + logicalID
}

// memSecrets is Secrets Manager in a map, by ARN.
type memSecrets struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[*in.SecretId]
	if !ok {
		return nil, fmt.Errorf("ResourceNotFoundException: %s", *in.SecretId)
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: &v}, nil
}

func (s *memSecrets) PutSecretValue(_ context.Context, in *secretsmanager.PutSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[*in.SecretId]; !ok {
		return nil, fmt.Errorf("ResourceNotFoundException: %s", *in.SecretId)
	}
	s.m[*in.SecretId] = *in.SecretString
	return &secretsmanager.PutSecretValueOutput{}, nil
}

// ecsSecret resolves a task definition secret's ValueFrom as ECS does:
// the secret's ARN, optionally followed by :json-key:version-stage:version-id.
func (s *memSecrets) ecsSecret(valueFrom string) (string, error) {
	parts := strings.Split(valueFrom, ":")
	if len(parts) < 7 {
		return "", fmt.Errorf("ValueFrom %q is not a secret ARN", valueFrom)
	}
	arn := strings.Join(parts[:7], ":")
	s.mu.Lock()
	v, ok := s.m[arn]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no secret %s", arn)
	}
	if len(parts) == 7 || parts[7] == "" {
		return v, nil
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(v), &fields); err != nil {
		return "", fmt.Errorf("%s is not JSON, so it has no key %s", arn, parts[7])
	}
	f, ok := fields[parts[7]].(string)
	if !ok {
		return "", fmt.Errorf("%s has no key %s", arn, parts[7])
	}
	return f, nil
}

func randomPassword(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

// deployment is the template's resources brought to life.
type deployment struct {
	s       *synthesized
	secrets *memSecrets
	refs    map[string]string // Ref / GetAtt values, by logical id (and id.attr)
}

// deploy creates the secrets as Secrets Manager would from their
// GenerateSecretString, then runs the certificate issuer's custom resource
// (functions/certissuer) with the resolved properties, as CloudFormation
// would.
func deploy(t *testing.T, s *synthesized, tableName, bucketName string) *deployment {
	t.Helper()
	d := &deployment{s: s, secrets: &memSecrets{m: map[string]string{}}, refs: map[string]string{
		"AWS::Region": fakeRegion, "AWS::AccountId": fakeAccount, "AWS::Partition": "aws",
	}}
	for id, r := range s.resources("AWS::SecretsManager::Secret") {
		gen, _ := props(r)["GenerateSecretString"].(map[string]any)
		value := randomPassword(32)
		if tpl, ok := gen["SecretStringTemplate"].(string); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(tpl), &m); err != nil {
				t.Fatalf("%s: template %q: %v", id, tpl, err)
			}
			m[gen["GenerateStringKey"].(string)] = value
			b, _ := json.Marshal(m)
			value = string(b)
		}
		d.secrets.m[secretARN(id)] = value
		d.refs[id] = secretARN(id)
	}
	for id := range s.resources("AWS::DynamoDB::Table") {
		d.refs[id] = tableName
	}
	for id := range s.resources("AWS::S3::Bucket") {
		d.refs[id] = bucketName
	}
	for id, r := range s.resources(pkiResourceType) {
		p := map[string]any{}
		for k, v := range props(r) {
			if k == "ServiceToken" {
				continue
			}
			rv, err := d.resolve(v)
			if err != nil {
				t.Fatalf("%s.%s: %v", id, k, err)
			}
			p[k] = rv
		}
		is := &certissuer.Issuer{Store: d.secrets}
		_, data, err := is.Handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, LogicalResourceID: id, ResourceProperties: p})
		if err != nil {
			t.Fatalf("the certificate issuer: %v", err)
		}
		for k, v := range data {
			d.refs[id+"."+k] = fmt.Sprint(v)
		}
	}
	return d
}

// resolve evaluates the intrinsic functions a template value uses here:
// Ref, Fn::GetAtt (of the custom resource) and Fn::Join; lists element by
// element.
func (d *deployment) resolve(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := d.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		if id, ok := x["Ref"].(string); ok {
			if r, ok := d.refs[id]; ok {
				return r, nil
			}
			return nil, fmt.Errorf("no value for Ref %s", id)
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			key := fmt.Sprint(ga[0]) + "." + fmt.Sprint(ga[1])
			if r, ok := d.refs[key]; ok {
				return r, nil
			}
			return nil, fmt.Errorf("no value for GetAtt %s", key)
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			parts, err := d.resolve(j[1])
			if err != nil {
				return nil, err
			}
			var ss []string
			for _, p := range parts.([]any) {
				ss = append(ss, fmt.Sprint(p))
			}
			return strings.Join(ss, fmt.Sprint(j[0])), nil
		}
	}
	return nil, fmt.Errorf("cannot resolve %v", v)
}

func (d *deployment) str(t *testing.T, v any) string {
	t.Helper()
	r, err := d.resolve(v)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := r.(string)
	if !ok {
		t.Fatalf("%v is not a string", r)
	}
	return s
}

// brokerEnv is the broker container's environment as ECS starts it: the
// plain variables and the secrets, read from Secrets Manager.
func (d *deployment) brokerEnv(t *testing.T) map[string]string {
	t.Helper()
	c := d.s.container(t)
	env := map[string]string{}
	for k, v := range namedList(c["Environment"], "Value") {
		env[k] = d.str(t, v)
	}
	for k, v := range namedList(c["Secrets"], "ValueFrom") {
		val, err := d.secrets.ecsSecret(d.str(t, v))
		if err != nil {
			t.Fatalf("secret %s: %v", k, err)
		}
		env[k] = val
	}
	return env
}

// functionEnv is a Kafka function's environment, found by its user.
func (d *deployment) functionEnv(t *testing.T, user string) map[string]string {
	t.Helper()
	for _, r := range d.s.resources("AWS::Lambda::Function") {
		env, _ := props(r)["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if id := ref(vars["STRATA_SASL_SECRET_ARN"]); id == "" || d.s.secretUser(id) != user {
			continue
		}
		out := map[string]string{}
		for k, v := range vars {
			out[k] = d.str(t, v)
		}
		return out
	}
	t.Fatalf("no function with user %s", user)
	return nil
}

// proc is a started process whose stdout lines are scanned.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan error
	stderr *strings.Builder
	mu     sync.Mutex
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 16), exited: make(chan error, 1), stderr: &strings.Builder{}}
	p.cmd.Env = env
	p.cmd.Stderr = p
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", filepath.Base(bin), strings.Join(args, " "), tail(p.log(), 40))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitLine returns the first stdout line containing want.
func (p *proc) waitLine(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, want) {
				return l
			}
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("%s exited before %q: %v\n%s", p.cmd.Path, want, err, tail(p.log(), 40))
		case <-deadline:
			t.Fatalf("%s: no %q in %v\n%s", p.cmd.Path, want, timeout, tail(p.log(), 40))
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fakeTaskMetadata serves the ECS task metadata endpoint (v4) of one task
// in zone az whose private DNS name is dnsName.
func fakeTaskMetadata(t *testing.T, az, dnsName string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/task") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"AvailabilityZone":%q,"Containers":[{"Name":"broker","Networks":[{"NetworkMode":"awsvpc","IPv4Addresses":["127.0.0.1"],"PrivateDNSName":%q}]}]}`, az, dnsName)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v4/task"
}

// buildBinaries builds brokerfleet and the AWS stand-in from the
// repository root.
func buildBinaries(t *testing.T) (brokerfleet, localstack string) {
	t.Helper()
	cfg, err := DefaultConfig().withPaths()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./brokerfleet", "./localstack")
	cmd.Dir = cfg.RepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./brokerfleet ./localstack: %v\n%s", err, out)
	}
	return filepath.Join(dir, "brokerfleet"), filepath.Join(dir, "localstack")
}

// TestDeployedClusterIsSecure synthesizes the stack, "deploys" it here
// (secrets generated, the issuer run, the task definition's environment
// and secrets resolved as ECS does) and starts three `brokerfleet serve`
// processes with exactly that environment against the DynamoDB and S3
// stand-in. Only what a machine cannot share changes: each broker's port
// (its listener address), its data directory, the HTTP ports, the AWS
// endpoint and the task metadata endpoint (whose private DNS name is
// localhost, added to the certificate with the certNames setting).
//
// Then a client configured from the trigger function's own environment
// (functions/kafkaauth: its user's secret and the CA secret) consumes in
// its group over TLS + SCRAM-SHA-512 and produces with acks=all to its
// .retry topic (replicated to three brokers over the brokers' own TLS +
// SCRAM connections); it may not write a topic outside its ACLs; and a
// client without credentials, with a wrong password, with another CA, or
// in plaintext is refused.
func TestDeployedClusterIsSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	brokerfleet, localstack := buildBinaries(t)
	s := synth(t, map[string]any{"certNames": "localhost", "triggerTopics": "orders", "triggerFunction": "order-handler"})
	d := deploy(t, s, "strata", "strata")
	base := d.brokerEnv(t)

	aws := start(t, localstack, []string{"PATH=" + os.Getenv("PATH")}, "-listen", "127.0.0.1:0", "-table", "strata", "-bucket", "strata")
	line := aws.waitLine(t, "http://", 30*time.Second)
	endpoint := line[strings.Index(line, "http://"):]

	// What may differ from the task definition, and how.
	changed := map[string]bool{"STRATA_LISTENERS": true, "STRATA_REGISTRY": true, "STRATA_HTTP": true, "STRATA_DATA": true}
	var bootstrap []string
	var brokers []*proc
	for i := range 3 {
		port := freePort(t)
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		listener, ok := strings.CutSuffix(base["STRATA_LISTENERS"], "://0.0.0.0:9092")
		if !ok || listener != "SASL_SSL" {
			t.Fatalf("the task's listener is %q", base["STRATA_LISTENERS"])
		}
		env["STRATA_LISTENERS"] = fmt.Sprintf("%s://127.0.0.1:%d", listener, port)
		env["STRATA_REGISTRY"] = "127.0.0.1:0"
		env["STRATA_HTTP"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		env["STRATA_DATA"] = filepath.Join(t.TempDir(), "data")
		for k := range env {
			if env[k] != base[k] && !changed[k] {
				t.Fatalf("%s changed", k)
			}
		}
		vars := []string{
			"PATH=" + os.Getenv("PATH"),
			"STRATA_AWS_ENDPOINT=" + endpoint,
			"ECS_CONTAINER_METADATA_URI_V4=" + fakeTaskMetadata(t, fmt.Sprintf("%s%c", fakeRegion, 'a'+i), "localhost"),
		}
		for k, v := range env {
			vars = append(vars, k+"="+v)
		}
		brokers = append(brokers, start(t, brokerfleet, vars, "serve"))
		bootstrap = append(bootstrap, fmt.Sprintf("localhost:%d", port))
	}
	for i, b := range brokers {
		if l := b.waitLine(t, "strata ready", 60*time.Second); !strings.HasSuffix(l, bootstrap[i]) {
			t.Fatalf("broker %d: %q, want it to advertise %s (the task's DNS name)", i, l, bootstrap[i])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fnEnv := d.functionEnv(t, TriggerUser)
	if fnEnv["STRATA_BOOTSTRAP"] != Bootstrap {
		t.Fatalf("the trigger bootstraps from %q", fnEnv["STRATA_BOOTSTRAP"])
	}
	auth, err := kafkaauth.FromEnv(func(k string) (string, bool) { v, ok := fnEnv[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	fnOpts, err := auth.Opts(ctx, d.secrets)
	if err != nil {
		t.Fatal(err)
	}
	// The admin, from its secret.
	var admin kafkaauth.UserSecret
	raw, _ := d.secrets.ecsSecret(d.str(t, s.json["Outputs"].(map[string]any)["AdminSecretArn"].(map[string]any)["Value"]))
	if err := json.Unmarshal([]byte(raw), &admin); err != nil || admin.Username != AdminUser {
		t.Fatalf("admin secret: %v %q", err, admin.Username)
	}
	adminOpts := append([]kgo.Opt{fnOpts[0]}, kgo.SASL(scram.Auth{User: admin.Username, Pass: admin.Password}.AsSha512Mechanism()))
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.RecordRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(client(adminOpts...))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		md, err := adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 brokers not registered: %v %v", md.Brokers, err)
		}
	}
	for _, topic := range []string{"orders", "orders.retry", "payments"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	if err := client(adminOpts...).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatalf("admin produce: %v", err)
	}

	// The trigger's credentials: consume in its group, write its .retry
	// topic with acks=all (three replicas in sync over TLS + SCRAM).
	trigger := client(append(fnOpts, kgo.ConsumerGroup(s.stack.Config.TriggerGroup), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	fetched := ""
	for fetched == "" && ctx.Err() == nil {
		fs := trigger.PollFetches(ctx)
		if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("trigger consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { fetched = string(r.Value) })
	}
	if fetched != "o1" {
		t.Fatalf("trigger fetched %q", fetched)
	}
	if err := trigger.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("trigger commit: %v", err)
	}
	if err := trigger.ProduceSync(ctx, &kgo.Record{Topic: "orders.retry", Value: []byte("r1")}).FirstErr(); err != nil {
		t.Fatalf("trigger produce to orders.retry: %v", err)
	}
	if err := trigger.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("trigger produce to payments (no ACL): %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Refused: no credentials, a wrong password, another CA, plaintext.
	// Ping authenticates (with SASL configured) or says ApiVersions, which
	// a SASL listener answers before authentication, so without
	// credentials a real request is tried, and in the end nothing of the
	// refused clients must be in the topic.
	refused := func(what string, check func(error) bool, opts ...kgo.Opt) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cl := client(opts...)
		err := cl.Ping(pctx)
		if err == nil {
			err = cl.ProduceSync(pctx, &kgo.Record{Topic: "orders", Value: []byte("refused")}).FirstErr()
		}
		switch {
		case err == nil:
			t.Errorf("%s: accepted", what)
		case !check(err):
			t.Errorf("%s: %v", what, err)
		default:
			t.Logf("%s: refused: %v", what, err)
		}
	}
	anyErr := func(error) bool { return true }
	var u kafkaauth.UserSecret
	raw, _ = d.secrets.ecsSecret(fnEnv["STRATA_SASL_SECRET_ARN"])
	json.Unmarshal([]byte(raw), &u)
	tlsOnly := fnOpts[0]
	refused("a wrong password", func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) },
		tlsOnly, kgo.SASL(scram.Auth{User: u.Username, Pass: u.Password + "x"}.AsSha512Mechanism()))
	refused("TLS without SASL", anyErr, tlsOnly)
	refused("another CA (the system's)", func(err error) bool { return strings.Contains(err.Error(), "certificate") }, kgo.DialTLS(), fnOpts[1])
	refused("plaintext with SASL", anyErr, fnOpts[1])
	refused("plaintext without SASL", anyErr)

	check := client(append(adminOpts, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got []string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		check.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		cancel()
	}
	if strings.Join(got, ",") != "o1" {
		t.Errorf("orders holds %v, want only o1", got)
	}
}
