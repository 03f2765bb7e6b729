package stack

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// starOnlyActions take no resource narrower than "*" (so Resource "*" is
// the least privilege for them).
var starOnlyActions = map[string]bool{
	"ec2:CreateNetworkInterface":       true,
	"ec2:DescribeNetworkInterfaces":    true,
	"ec2:DeleteNetworkInterface":       true,
	"ec2:AssignPrivateIpAddresses":     true,
	"ec2:UnassignPrivateIpAddresses":   true,
	"ec2:DescribeSubnets":              true,
	"ec2:DescribeSecurityGroups":       true,
	"ec2:DescribeVpcs":                 true,
	"ecr:GetAuthorizationToken":        true,
	"xray:PutTraceSegments":            true,
	"xray:PutTelemetryRecords":         true,
	"cloudwatch:PutMetricData":         true,
	"logs:PutRetentionPolicy":          true, // CDK's log retention function
	"logs:DeleteRetentionPolicy":       true,
	"logs:DescribeLogGroups":           true,
	"secretsmanager:GetRandomPassword": true,
}

// broadManagedPolicies are AWS managed policies no role here may carry.
var broadManagedPolicies = []string{"FullAccess", "AdministratorAccess", "PowerUserAccess"}

// iamProblems lists every over-broad grant in a template: Allow
// statements (identity or resource policies) with a service-wide action
// ("*", "s3:*") or, for actions that take narrower resources, Resource
// "*"; NotAction/NotResource in an Allow; and *FullAccess-style managed
// policies.
func iamProblems(template map[string]any) []string {
	var problems []string
	res, _ := template["Resources"].(map[string]any)
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, _ := res[id].(map[string]any)
		typ, _ := r["Type"].(string)
		p, _ := r["Properties"].(map[string]any)
		where := id + " (" + typ + ")"
		check := func(doc any, keyPolicy bool) {
			problems = append(problems, policyProblems(where, doc, keyPolicy)...)
		}
		switch typ {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy",
			"AWS::SQS::QueuePolicy", "AWS::SecretsManager::ResourcePolicy", "AWS::Events::EventBusPolicy":
			check(p["PolicyDocument"], false)
		case "AWS::Logs::ResourcePolicy":
			check(p["PolicyDocument"], false) // a JSON string; policyProblems decodes it
		case "AWS::KMS::Key":
			check(p["KeyPolicy"], true)
		case "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable":
			if rp, ok := p["ResourcePolicy"].(map[string]any); ok {
				check(rp["PolicyDocument"], false)
			}
		case "AWS::Lambda::Permission":
			if a, _ := p["Action"].(string); a == "*" || strings.HasSuffix(a, ":*") {
				problems = append(problems, fmt.Sprintf("%s: permission for %q", where, a))
			}
		case "AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group":
			policies, _ := p["Policies"].([]any)
			for _, pol := range policies {
				pol, _ := pol.(map[string]any)
				check(pol["PolicyDocument"], false)
			}
			arns, _ := p["ManagedPolicyArns"].([]any)
			for _, arn := range arns {
				b, _ := json.Marshal(arn)
				for _, broad := range broadManagedPolicies {
					if strings.Contains(string(b), broad) {
						problems = append(problems, fmt.Sprintf("%s: managed policy %s", where, b))
					}
				}
			}
		}
	}
	return problems
}

// policyProblems checks one policy document. In a KMS key policy, Resource
// "*" means the key itself, and the account root may hold kms:*: that is
// the key policy that lets IAM policies grant use of the key at all.
func policyProblems(where string, doc any, keyPolicy bool) []string {
	if s, ok := doc.(string); ok {
		var d any
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return []string{fmt.Sprintf("%s: policy document does not parse: %v", where, err)}
		}
		doc = d
	}
	d, _ := doc.(map[string]any)
	var statements []any
	switch st := d["Statement"].(type) {
	case []any:
		statements = st
	case map[string]any:
		statements = []any{st}
	}
	var problems []string
	for i, st := range statements {
		st, _ := st.(map[string]any)
		if st["Effect"] != "Allow" {
			continue
		}
		at := fmt.Sprintf("%s statement %d", where, i)
		if _, ok := st["NotAction"]; ok {
			problems = append(problems, at+": Allow with NotAction")
		}
		if _, ok := st["NotResource"]; ok {
			problems = append(problems, at+": Allow with NotResource")
		}
		actions := strs(st["Action"])
		rootOnly := keyPolicy && isAccountRoot(st["Principal"])
		for _, a := range actions {
			if a == "*" || strings.HasSuffix(a, ":*") {
				if rootOnly && a == "kms:*" {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s: action %q", at, a))
			}
		}
		if keyPolicy {
			continue
		}
		if anyStar(st["Resource"]) {
			for _, a := range actions {
				if !starOnlyActions[a] {
					problems = append(problems, fmt.Sprintf("%s: action %q on Resource \"*\"", at, a))
				}
			}
		}
	}
	return problems
}

// strs returns a string or a list of strings as a list (tokens as their
// JSON).
func strs(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, strs(e)...)
		}
		return out
	default:
		b, _ := json.Marshal(x)
		return []string{string(b)}
	}
}

func anyStar(v any) bool {
	for _, s := range strs(v) {
		if s == "*" {
			return true
		}
	}
	return false
}

// isAccountRoot reports whether principal is exactly {"AWS": this
// account's root}, as CDK writes it.
func isAccountRoot(principal any) bool {
	p, _ := principal.(map[string]any)
	if len(p) != 1 {
		return false
	}
	b, _ := json.Marshal(p["AWS"])
	return strings.Contains(string(b), `{"Ref":"AWS::AccountId"}`) && strings.HasSuffix(string(b), `":root"]]}`)
}

func TestIAMLeastPrivilege(t *testing.T) {
	s := defaultStack(t)
	if problems := iamProblems(s.json); len(problems) > 0 {
		t.Errorf("over-broad IAM:\n%s", strings.Join(problems, "\n"))
	}
	// The walk saw the policies it should have.
	n := len(s.resources("AWS::IAM::Policy")) + len(s.resources("AWS::IAM::Role")) + len(s.resources("AWS::S3::BucketPolicy")) + len(s.resources("AWS::KMS::Key"))
	if n < 6 {
		t.Errorf("only %d policy-bearing resources", n)
	}
}

// TestIAMCheckerCatches feeds hand-made bad grants through the checker.
func TestIAMCheckerCatches(t *testing.T) {
	root := map[string]any{"AWS": map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":iam::", map[string]any{"Ref": "AWS::AccountId"}, ":root"}}}}
	policy := func(statements ...map[string]any) map[string]any {
		var st []any
		for _, s := range statements {
			st = append(st, s)
		}
		return map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{"PolicyDocument": map[string]any{"Statement": st}}}
	}
	tableArn := map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}}
	for _, tc := range []struct {
		name     string
		resource map[string]any
		bad      bool
	}{
		{"service wildcard", policy(map[string]any{"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"}), true},
		{"full wildcard", policy(map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:GetItem", "*"}, "Resource": tableArn}), true},
		{"resource star", policy(map[string]any{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"}), true},
		{"resource star in a list", policy(map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": []any{tableArn, "*"}}), true},
		{"not action", policy(map[string]any{"Effect": "Allow", "NotAction": "iam:*", "Resource": tableArn}), true},
		{"inline role policy", map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{"Policies": []any{map[string]any{
			"PolicyName": "p", "PolicyDocument": map[string]any{"Statement": map[string]any{"Effect": "Allow", "Action": "kms:*", "Resource": tableArn}},
		}}}}, true},
		{"full access managed policy", map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{
			"ManagedPolicyArns": []any{"arn:aws:iam::aws:policy/AmazonS3FullAccess"},
		}}, true},
		{"bucket policy", map[string]any{"Type": "AWS::S3::BucketPolicy", "Properties": map[string]any{"PolicyDocument": map[string]any{
			"Statement": []any{map[string]any{"Effect": "Allow", "Principal": "*", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"}},
		}}}, true},
		{"logs resource policy as a string", map[string]any{"Type": "AWS::Logs::ResourcePolicy", "Properties": map[string]any{
			"PolicyDocument": `{"Statement":[{"Effect":"Allow","Action":"logs:*","Resource":"*"}]}`,
		}}, true},
		{"key policy for someone else", map[string]any{"Type": "AWS::KMS::Key", "Properties": map[string]any{"KeyPolicy": map[string]any{
			"Statement": []any{map[string]any{"Effect": "Allow", "Principal": map[string]any{"AWS": "arn:aws:iam::111122223333:role/x"}, "Action": "kms:*", "Resource": "*"}},
		}}}, true},
		{"lambda permission wildcard", map[string]any{"Type": "AWS::Lambda::Permission", "Properties": map[string]any{"Action": "lambda:*"}}, true},

		{"narrow grant", policy(map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:GetItem", "s3:GetObject*"}, "Resource": tableArn}), false},
		{"star-only action", policy(map[string]any{"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"}), false},
		{"deny is fine", policy(map[string]any{"Effect": "Deny", "Action": "s3:*", "Resource": "*"}), false},
		{"key policy delegating to the account", map[string]any{"Type": "AWS::KMS::Key", "Properties": map[string]any{"KeyPolicy": map[string]any{
			"Statement": []any{map[string]any{"Effect": "Allow", "Principal": root, "Action": "kms:*", "Resource": "*"}},
		}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := iamProblems(map[string]any{"Resources": map[string]any{"R": tc.resource}})
			if tc.bad && len(problems) == 0 {
				t.Errorf("checker passed %v", tc.resource)
			}
			if !tc.bad && len(problems) > 0 {
				t.Errorf("checker refused a narrow grant: %v", problems)
			}
		})
	}
}
