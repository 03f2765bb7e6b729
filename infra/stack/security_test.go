package stack

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// statements returns the statements of an AWS::IAM::Policy.
func statements(r map[string]any) []map[string]any {
	doc, _ := props(r)["PolicyDocument"].(map[string]any)
	var out []map[string]any
	list, _ := doc["Statement"].([]any)
	for _, st := range list {
		if m, ok := st.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// ref returns the logical id of {"Ref": id} or {"Fn::GetAtt": [id, ...]}.
func ref(v any) string {
	m, _ := v.(map[string]any)
	if id, ok := m["Ref"].(string); ok {
		return id
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
		id, _ := ga[0].(string)
		return id
	}
	return ""
}

// container is the broker task's container definition.
func (s *synthesized) container(t *testing.T) map[string]any {
	t.Helper()
	defs, _ := props(only(t, s.resources("AWS::ECS::TaskDefinition")))["ContainerDefinitions"].([]any)
	if len(defs) != 1 {
		t.Fatalf("%d containers", len(defs))
	}
	return defs[0].(map[string]any)
}

// namedList turns [{"Name": n, <key>: v}...] into a map.
func namedList(v any, key string) map[string]any {
	out := map[string]any{}
	list, _ := v.([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if n, ok := m["Name"].(string); ok {
			out[n] = m[key]
		}
	}
	return out
}

// secretRef splits an ECS secret's ValueFrom into the secret's logical id
// and the JSON key ("" for the whole secret).
func secretRef(v any) (id, field string) {
	if id := ref(v); id != "" {
		return id, ""
	}
	m, _ := v.(map[string]any)
	join, _ := m["Fn::Join"].([]any)
	if len(join) != 2 {
		return "", ""
	}
	parts, _ := join[1].([]any)
	if len(parts) != 2 {
		return "", ""
	}
	suffix, _ := parts[1].(string)
	return ref(parts[0]), strings.TrimSuffix(strings.TrimPrefix(suffix, ":"), "::")
}

// secretUser is the user name a generated secret's template holds.
func (s *synthesized) secretUser(id string) string {
	r, ok := s.resources("AWS::SecretsManager::Secret")[id]
	if !ok {
		return ""
	}
	gen, _ := props(r)["GenerateSecretString"].(map[string]any)
	tpl, _ := gen["SecretStringTemplate"].(string)
	var u struct{ Username string }
	json.Unmarshal([]byte(tpl), &u)
	return u.Username
}

// pkiSecrets returns the logical ids of the PKI's three secrets, from the
// custom resource's properties.
func (s *synthesized) pkiSecrets(t *testing.T) (caKey, ca, tlsSecret string) {
	t.Helper()
	p := props(only(t, s.resources(pkiResourceType)))
	return ref(p["CAKeySecret"]), ref(p["CASecret"]), ref(p["TLSSecret"])
}

// TestBrokerTaskIsSecure: the task runs the SASL_SSL listener with SCRAM,
// the authorizer and the super users, and every secret comes from Secrets
// Manager by reference.
func TestBrokerTaskIsSecure(t *testing.T) {
	s := defaultStack(t)
	c := s.container(t)
	env := namedList(c["Environment"], "Value")
	for k, want := range map[string]string{
		"STRATA_LISTENERS":                   "SASL_SSL://0.0.0.0:9092",
		"STRATA_SASL_MECHANISMS":             "SCRAM-SHA-512",
		"STRATA_AUTHORIZER":                  "true",
		"STRATA_SUPER_USERS":                 "User:strata-admin;User:strata-broker",
		"STRATA_INTER_BROKER_USER":           "strata-broker",
		"STRATA_INTER_BROKER_SASL_MECHANISM": "SCRAM-SHA-512",
		"STRATA_ADVERTISE_PRIVATE_DNS":       "true",
		"STRATA_SCRAM_USERS_FROM_ENV":        "STRATA_SCRAM_USER_*",
		"STRATA_ACLS_FROM_ENV":               "STRATA_ACL_*",
		"STRATA_HTTP":                        "127.0.0.1:9644",
	} {
		if env[k] != want {
			t.Errorf("%s = %v, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"STRATA_LISTEN", "STRATA_SASL_ADMIN", "STRATA_INTER_BROKER_PASSWORD", "STRATA_TLS_CERT", "STRATA_TLS_KEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("%s is in the plain environment", k)
		}
	}
	_, _, tlsID := s.pkiSecrets(t)
	secrets := namedList(c["Secrets"], "ValueFrom")
	users := map[string]string{} // variable -> user name
	for k, v := range secrets {
		id, field := secretRef(v)
		if _, ok := s.resources("AWS::SecretsManager::Secret")[id]; !ok {
			t.Errorf("%s: ValueFrom %v is not a secret of the stack", k, v)
			continue
		}
		switch k {
		case "STRATA_TLS_CERT_PEM", "STRATA_TLS_KEY_PEM", "STRATA_INTER_BROKER_TLS_CA_PEM":
			want := map[string]string{"STRATA_TLS_CERT_PEM": "certificate", "STRATA_TLS_KEY_PEM": "privateKey", "STRATA_INTER_BROKER_TLS_CA_PEM": "caCertificate"}[k]
			if id != tlsID || field != want {
				t.Errorf("%s from %s:%s, want the TLS secret's %s", k, id, field, want)
			}
		case "STRATA_INTER_BROKER_PASSWORD":
			if s.secretUser(id) != BrokerUser || field != "password" {
				t.Errorf("%s from %s (user %q) field %q", k, id, s.secretUser(id), field)
			}
		default:
			if !strings.HasPrefix(k, "STRATA_SCRAM_USER_") || field != "" {
				t.Errorf("unexpected secret %s (%s:%s)", k, id, field)
			}
			users[k] = s.secretUser(id)
		}
	}
	wantUsers := map[string]string{
		"STRATA_SCRAM_USER_ADMIN": AdminUser, "STRATA_SCRAM_USER_BROKER": BrokerUser, "STRATA_SCRAM_USER_TRIGGER": TriggerUser,
		"STRATA_SCRAM_USER_RETRYWORKER": RetryWorkerUser, "STRATA_SCRAM_USER_DLQCONSOLE": DLQConsoleUser,
	}
	if !maps.Equal(users, wantUsers) {
		t.Errorf("users %v, want %v", users, wantUsers)
	}
	for _, k := range []string{"STRATA_TLS_CERT_PEM", "STRATA_TLS_KEY_PEM", "STRATA_INTER_BROKER_TLS_CA_PEM", "STRATA_INTER_BROKER_PASSWORD"} {
		if _, ok := secrets[k]; !ok {
			t.Errorf("no secret %s", k)
		}
	}
	// Each function's ACLs reach the brokers.
	if env["STRATA_ACL_TRIGGER"] != "User:strata-trigger group strata-trigger read" {
		t.Errorf("trigger ACLs %v", env["STRATA_ACL_TRIGGER"])
	}
	// A new certificate makes a new task definition (a rolling restart).
	labels, _ := c["DockerLabels"].(map[string]any)
	if ga, _ := labels["strata.tls-certificate-serial"].(map[string]any)["Fn::GetAtt"].([]any); len(ga) != 2 || ga[1] != attrSerial {
		t.Errorf("docker labels %v", labels)
	}
}

// TestNoSecretValueInTemplate: secrets are generated by Secrets Manager or
// written by the issuer; no PEM, key or password is in the template.
func TestNoSecretValueInTemplate(t *testing.T) {
	for _, ctx := range []map[string]any{nil, {"esmExample": true}} {
		s := defaultStack(t)
		if ctx != nil {
			s = synth(t, ctx)
		}
		for id, r := range s.resources("AWS::SecretsManager::Secret") {
			p := props(r)
			if _, ok := p["SecretString"]; ok {
				t.Errorf("%s has a SecretString", id)
			}
			if _, ok := p["GenerateSecretString"]; !ok {
				t.Errorf("%s has no generated value", id)
			}
			if p["KmsKeyId"] == nil {
				t.Errorf("%s is not encrypted with the stack's key", id)
			}
		}
		raw, _ := json.Marshal(s.json)
		for _, bad := range []string{"BEGIN CERTIFICATE", "PRIVATE KEY", `"password":`} {
			if strings.Contains(string(raw), bad) {
				t.Errorf("the template contains %q", bad)
			}
		}
		for id, r := range s.resources("AWS::Lambda::Function") {
			env, _ := props(r)["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			for k := range vars {
				if strings.Contains(k, "PASSWORD") || strings.HasSuffix(k, "_PEM") {
					t.Errorf("%s: %s in the environment", id, k)
				}
			}
		}
	}
}

// TestNoRuleAdmitsTheVPC: no ingress rule of any security group names a
// CIDR (the VPC's or any other); the brokers admit Kafka from themselves,
// the functions and named groups, and nothing on the metrics port.
func TestNoRuleAdmitsTheVPC(t *testing.T) {
	for _, ctx := range []map[string]any{nil, {"esmExample": "true", "clientSecurityGroups": "sg-0123456789abcdef0"}} {
		s := defaultStack(t)
		if ctx != nil {
			s = synth(t, ctx)
		}
		var rules []map[string]any
		var brokerSG, functionSG string
		for id, r := range s.resources("AWS::EC2::SecurityGroup") {
			in, _ := props(r)["SecurityGroupIngress"].([]any)
			for _, rule := range in {
				m := rule.(map[string]any)
				m["GroupId"] = map[string]any{"Fn::GetAtt": []any{id, "GroupId"}}
				rules = append(rules, m)
			}
			switch {
			case strings.Contains(id, "BrokerSG"):
				brokerSG = id
			case strings.Contains(id, "FunctionSG"):
				functionSG = id
			}
		}
		for _, r := range s.resources("AWS::EC2::SecurityGroupIngress") {
			rules = append(rules, props(r))
		}
		admitted := map[float64][]string{} // port -> sources into the brokers' group
		for _, r := range rules {
			for _, k := range []string{"CidrIp", "CidrIpv6", "SourcePrefixListId"} {
				if v, ok := r[k]; ok {
					t.Errorf("ingress from %s %v: %v", k, v, r)
				}
			}
			if ref(r["GroupId"]) != brokerSG {
				t.Errorf("ingress into %s: %v", ref(r["GroupId"]), r)
				continue
			}
			if r["FromPort"] != r["ToPort"] {
				t.Errorf("port range %v-%v", r["FromPort"], r["ToPort"])
			}
			src := ref(r["SourceSecurityGroupId"])
			if src == "" {
				src, _ = r["SourceSecurityGroupId"].(string)
			}
			admitted[r["FromPort"].(float64)] = append(admitted[r["FromPort"].(float64)], src)
		}
		if len(admitted[HTTPPort]) > 0 {
			t.Errorf("the metrics port admits %v", admitted[HTTPPort])
		}
		kafka, registry := admitted[KafkaPort], admitted[RegistryPort]
		for _, want := range []string{brokerSG, functionSG} {
			if !slices.Contains(kafka, want) {
				t.Errorf("Kafka does not admit %s: %v", want, kafka)
			}
		}
		if !slices.Contains(registry, functionSG) || slices.Contains(registry, brokerSG) {
			t.Errorf("registry admits %v", registry)
		}
		if ctx != nil {
			if !slices.Contains(kafka, "sg-0123456789abcdef0") || !slices.Contains(registry, "sg-0123456789abcdef0") {
				t.Errorf("the client group is not admitted: %v %v", kafka, registry)
			}
			if len(kafka) != 4 {
				t.Errorf("Kafka admits %v, want brokers, functions, the client group and the event source's pollers", kafka)
			}
		}
	}
}

// roleSecrets maps each role's logical id to the secrets its policies let
// it read (secretsmanager:GetSecretValue).
func (s *synthesized) roleSecrets() map[string][]string {
	out := map[string][]string{}
	for _, r := range s.resources("AWS::IAM::Policy") {
		roles, _ := props(r)["Roles"].([]any)
		for _, st := range statements(r) {
			if st["Effect"] != "Allow" || !slices.Contains(strs(st["Action"]), "secretsmanager:GetSecretValue") {
				continue
			}
			res := st["Resource"]
			if l, ok := res.([]any); ok && len(l) == 1 {
				res = l[0]
			}
			for _, role := range roles {
				out[ref(role)] = append(out[ref(role)], ref(res))
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// TestFunctionRolesReadOnlyTheirSecrets: each function's role reads its
// own user's secret and the CA, nothing else; the CA key is the issuer's
// alone; the broker's task role reads no secret.
func TestFunctionRolesReadOnlyTheirSecrets(t *testing.T) {
	s := synth(t, map[string]any{"esmExample": true})
	caKey, ca, tlsID := s.pkiSecrets(t)
	readers := s.roleSecrets()
	fns := 0
	for id, r := range s.resources("AWS::Lambda::Function") {
		p := props(r)
		role := ref(p["Role"])
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		own := ref(vars["STRATA_SASL_SECRET_ARN"])
		switch {
		case own != "":
			fns++
			if ref(vars["STRATA_TLS_CA_SECRET_ARN"]) != ca {
				t.Errorf("%s: CA secret %v", id, vars["STRATA_TLS_CA_SECRET_ARN"])
			}
			if want := []string{ca, own}; !slices.Equal(readers[role], sorted(want)) {
				t.Errorf("%s (user %s) reads %v, want only %v", id, s.secretUser(own), readers[role], want)
			}
		case strings.HasPrefix(id, "PKIIssuer"):
			if want := sorted([]string{caKey, tlsID}); !slices.Equal(readers[role], want) {
				t.Errorf("the issuer reads %v, want %v", readers[role], want)
			}
		case strings.HasPrefix(id, "EsmExample"):
			esmUser := ""
			for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
				for _, c := range props(m)["SourceAccessConfigurations"].([]any) {
					if c := c.(map[string]any); c["Type"] == "SASL_SCRAM_512_AUTH" {
						esmUser = ref(c["URI"])
					}
				}
			}
			if want := sorted([]string{ca, esmUser}); esmUser == "" || !slices.Equal(readers[role], want) {
				t.Errorf("the example reads %v, want %v", readers[role], want)
			}
		default:
			t.Errorf("unexpected function %s", id)
		}
	}
	if fns != 3 {
		t.Errorf("%d functions with a user", fns)
	}
	users := map[string]bool{}
	for role, secrets := range readers {
		for _, sec := range secrets {
			if sec == caKey && !strings.HasPrefix(role, "PKIIssuer") {
				t.Errorf("%s reads the CA key", role)
			}
			if strings.HasPrefix(role, "FleetTaskTaskRole") {
				t.Errorf("the broker's task role reads %s", sec)
			}
			users[sec] = true
		}
	}
	if len(s.resources("AWS::SecretsManager::Secret")) != len(users) {
		t.Errorf("%d secrets, %d read by someone", len(s.resources("AWS::SecretsManager::Secret")), len(users))
	}
	// The brokers may not remove object versions: the bucket keeps what they delete.
	for id, r := range s.resources("AWS::IAM::Policy") {
		for _, st := range statements(r) {
			for _, a := range strs(st["Action"]) {
				if a == "s3:DeleteObjectVersion" || a == "s3:DeleteObject*" || a == "s3:*" {
					t.Errorf("%s: %s", id, a)
				}
			}
		}
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// TestEventSourceMapping: with esmExample the app deploys the example
// consumer behind AWS's event source mapping: SCRAM-SHA-512 with its own
// user, the PKI's CA as SERVER_ROOT_CA_CERTIFICATE, the private subnets
// and a pollers' group the brokers admit, failures to <topic>.dlq; the
// brokers get that user with AWS's documented ACLs.
func TestEventSourceMapping(t *testing.T) {
	s := synth(t, map[string]any{"esmExample": "true", "esmExampleTopic": "orders"})
	_, ca, _ := s.pkiSecrets(t)
	m := props(only(t, s.resources("AWS::Lambda::EventSourceMapping")))
	access := map[string][]string{}
	for _, c := range m["SourceAccessConfigurations"].([]any) {
		c := c.(map[string]any)
		access[c["Type"].(string)] = append(access[c["Type"].(string)], ref(c["URI"]))
	}
	if len(access["SASL_SCRAM_512_AUTH"]) != 1 || s.secretUser(access["SASL_SCRAM_512_AUTH"][0]) != "strata-esm-example" {
		t.Errorf("SASL_SCRAM_512_AUTH %v", access["SASL_SCRAM_512_AUTH"])
	}
	if !slices.Equal(access["SERVER_ROOT_CA_CERTIFICATE"], []string{ca}) {
		t.Errorf("SERVER_ROOT_CA_CERTIFICATE %v, want the CA secret %s", access["SERVER_ROOT_CA_CERTIFICATE"], ca)
	}
	if len(access["VPC_SUBNET"]) != 3 || len(access["VPC_SECURITY_GROUP"]) != 1 {
		t.Errorf("VPC access %v", access)
	}
	for _, sn := range access["VPC_SUBNET"] {
		if !strings.Contains(sn, "private") {
			t.Errorf("subnet %s is not private", sn)
		}
	}
	for k, want := range map[string]string{
		"Topics": `["orders"]`, "StartingPosition": `"TRIM_HORIZON"`, "BatchSize": "100",
		"SelfManagedEventSource":            `{"Endpoints":{"KafkaBootstrapServers":["brokers.strata.internal:9092"]}}`,
		"SelfManagedKafkaEventSourceConfig": `{"ConsumerGroupId":"strata-esm-example"}`,
		"DestinationConfig":                 `{"OnFailure":{"Destination":"kafka://orders.dlq"}}`,
		"ProvisionedPollerConfig":           `{"MaximumPollers":2,"MinimumPollers":1}`,
	} {
		if got, _ := json.Marshal(m[k]); string(got) != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	c := s.container(t)
	env := namedList(c["Environment"], "Value")
	want := "User:strata-esm-example cluster kafka-cluster describe_configs;User:strata-esm-example group strata-esm-example describe,read;" +
		"User:strata-esm-example topic orders describe,read;User:strata-esm-example topic orders.dlq describe,write"
	if env["STRATA_ACL_ESM_ESMEXAMPLESOURCE"] != want {
		t.Errorf("the event source's ACLs: %v", env["STRATA_ACL_ESM_ESMEXAMPLESOURCE"])
	}
	id, _ := secretRef(namedList(c["Secrets"], "ValueFrom")["STRATA_SCRAM_USER_ESM_ESMEXAMPLESOURCE"])
	if id != access["SASL_SCRAM_512_AUTH"][0] {
		t.Errorf("the brokers create the user from %q, the mapping uses %v", id, access["SASL_SCRAM_512_AUTH"])
	}
	s.template.HasOutput(strPtr("EsmExampleFunction"), map[string]any{})
}

func strPtr(s string) *string { return &s }

// TestPKI: the custom resource names the bootstrap name and the tasks'
// private DNS names, the rotation settings reach it, and the functions and
// the service wait for it.
func TestPKI(t *testing.T) {
	s := synth(t, map[string]any{"tlsRotation": "2027-01", "caRotation": "2", "certNames": "kafka.example.com", "certValidityDays": 90})
	p := props(only(t, s.resources(pkiResourceType)))
	names, _ := json.Marshal(p["DNSNames"])
	for _, want := range []string{`"brokers.strata.internal"`, `"*.ec2.internal"`, `"*.",{"Ref":"AWS::Region"},".compute.internal"`, `"kafka.example.com"`} {
		if !strings.Contains(string(names), want) {
			t.Errorf("DNSNames %s lacks %s", names, want)
		}
	}
	if p["CertGeneration"] != "2027-01" || p["CAGeneration"] != "2" || p["CertValidityDays"] != "90" || p["Cluster"] != "strata" {
		t.Errorf("properties %v", p)
	}
	if !strings.HasPrefix(ref(p["ServiceToken"]), "PKIIssuer") {
		t.Errorf("service token %v", p["ServiceToken"])
	}
	pkiID := ""
	for id := range s.resources(pkiResourceType) {
		pkiID = id
	}
	waits := 0
	for _, typ := range []string{"AWS::ECS::Service", "AWS::Lambda::Function"} {
		for id, r := range s.resources(typ) {
			deps := strs(r["DependsOn"])
			if slices.Contains(deps, pkiID) {
				waits++
			} else if !strings.HasPrefix(id, "PKIIssuer") {
				t.Errorf("%s does not wait for the PKI: %v", id, deps)
			}
		}
	}
	if waits != 4 {
		t.Errorf("%d resources wait for the PKI, want the service and three functions", waits)
	}
	vars := map[string]any{}
	for _, r := range s.resources("AWS::Lambda::Function") {
		if v, ok := props(r)["Environment"].(map[string]any); ok {
			maps.Copy(vars, v["Variables"].(map[string]any))
		}
	}
	if ga, _ := vars["STRATA_TLS_CA_VERSION"].(map[string]any)["Fn::GetAtt"].([]any); len(ga) != 2 || ga[1] != attrTrust {
		t.Errorf("STRATA_TLS_CA_VERSION %v", vars["STRATA_TLS_CA_VERSION"])
	}
}

// TestACLs checks the principals' ACLs for a configured trigger.
func TestACLs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TriggerTopics, cfg.TriggerFunction, cfg.RetryTopics = "orders, payments", "f", "orders"
	for p, want := range map[string]string{
		TriggerPrincipal(cfg).ACLSpec(): "User:strata-trigger group strata-trigger read;User:strata-trigger topic orders read;User:strata-trigger topic payments read;" +
			"User:strata-trigger topic orders.retry write,create;User:strata-trigger topic payments.retry write,create;" +
			"User:strata-trigger topic orders.dlq write,create;User:strata-trigger topic payments.dlq write,create",
		RetryWorkerPrincipal(cfg).ACLSpec(): "User:strata-retryworker group strata-retryworker read;User:strata-retryworker topic orders.retry read;" +
			"User:strata-retryworker topic orders write;User:strata-retryworker topic orders.dlq write",
		DLQConsolePrincipal(cfg).ACLSpec(): "User:strata-dlqconsole group strata-dlq-console read;User:strata-dlqconsole cluster kafka-cluster describe;" +
			"User:strata-dlqconsole topic * describe,describe_configs;User:strata-dlqconsole group * describe;" +
			"User:strata-dlqconsole topic orders.dlq read;User:strata-dlqconsole topic orders write",
	} {
		if p != want {
			t.Errorf("got  %s\nwant %s", p, want)
		}
	}
	if (Principal{Key: "X", Name: "x"}).ACLEnv() != "" {
		t.Error("a principal without ACLs has an ACL variable")
	}
}
