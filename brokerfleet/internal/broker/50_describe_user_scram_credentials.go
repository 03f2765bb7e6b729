package broker

// DescribeUserScramCredentials, version 0 (KIP-554): each user's
// mechanisms and iteration counts, never salts or keys. No users means
// all. Needs DESCRIBE on the cluster, or with ACLs off a super user
// (mayManageCredentials).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(50, 0, 0, answer(handleDescribeUserSCRAMCredentials), authorizeDescribeUserSCRAMCredentials)
}

// scramMechCode maps SCRAM mechanism names to their wire codes (1, 2).
func scramMechCode(name string) int8 {
	switch name {
	case metastore.ScramSHA256:
		return 1
	case metastore.ScramSHA512:
		return 2
	}
	return 0
}

func scramMechName(code int8) string {
	switch code {
	case 1:
		return metastore.ScramSHA256
	case 2:
		return metastore.ScramSHA512
	}
	return ""
}

func handleDescribeUserSCRAMCredentials(b *Broker, cc *clientConn, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	if !mayManageCredentials(b, cc, opDescribe) {
		return describeSCRAMDenied(req)
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	result := func(user string, creds []metastore.ScramCredential) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		for _, c := range creds {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechCode(c.Mechanism), c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		return r
	}
	if len(req.Users) == 0 {
		all, err := b.meta.ScramCredentials(ctx, "")
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
			return resp
		}
		for i := 0; i < len(all); {
			j := i
			for j < len(all) && all[j].User == all[i].User {
				j++
			}
			resp.Results = append(resp.Results, result(all[i].User, all[i:j]))
			i = j
		}
		return resp
	}
	seen := map[string]int{}
	for _, u := range req.Users {
		seen[u.Name]++
	}
	for _, u := range req.Users {
		if seen[u.Name] == 0 {
			continue // a duplicate already answered
		}
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.Name
		switch creds, err := b.meta.ScramCredentials(ctx, u.Name); {
		case seen[u.Name] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
		case err != nil:
			r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		case len(creds) == 0:
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("attempt to describe a user credential that does not exist")
		default:
			r = result(u.Name, creds)
		}
		seen[u.Name] = 0
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// authorizeDescribeUserSCRAMCredentials is the ACL rule of DescribeUserSCRAMCredentials.
func authorizeDescribeUserSCRAMCredentials(a access, r *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !mayManageCredentials(a.b, a.cc, opDescribe) {
		return describeSCRAMDenied(r), nil
	}
	return nil, nil
}

// describeSCRAMDenied answers a request the principal may not make.
func describeSCRAMDenied(r *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode = errClusterAuthz
	return resp
}
