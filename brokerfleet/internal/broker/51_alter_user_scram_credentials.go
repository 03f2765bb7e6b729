package broker

// AlterUserScramCredentials, version 0 (KIP-554): upsertions carry the
// salt, iterations and salted password (the client salts); the broker
// keeps only the derived StoredKey and ServerKey. One result per user.
// Needs ALTER on the cluster, or with ACLs off a super user
// (mayManageCredentials). The broker's credential cache is dropped and the
// sessions of deleted credentials end at once; other brokers do the same
// at the change the write records.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(51, 0, 0, answer(handleAlterUserSCRAMCredentials), authorizeAlterUserSCRAMCredentials)
}

func handleAlterUserSCRAMCredentials(b *Broker, cc *clientConn, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	if !mayManageCredentials(b, cc, opAlter) {
		return alterSCRAMDenied(req)
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	changed := false
	defer func() {
		if changed {
			credentialsChanged(ctx, b)
		}
	}()

	type key struct {
		user string
		mech int8
	}
	count := map[key]int{}
	var order []string
	errs := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	note := func(user string) {
		if _, ok := errs[user]; !ok {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User = user
			errs[user] = &r
			order = append(order, user)
		}
	}
	fail := func(user string, code int16, msg string) {
		if r := errs[user]; r.ErrorCode == 0 {
			r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
		}
	}
	for _, d := range req.Deletions {
		note(d.Name)
		count[key{d.Name, d.Mechanism}]++
	}
	for _, u := range req.Upsertions {
		note(u.Name)
		count[key{u.Name, u.Mechanism}]++
	}
	for k, n := range count {
		if n > 1 {
			fail(k.user, kerr.DuplicateResource.Code, "a user credential cannot be altered twice in one request")
		}
	}
	for _, user := range order {
		switch {
		case user == "":
			fail(user, kerr.UnacceptableCredential.Code, "empty user name")
		}
	}
	for _, d := range req.Deletions {
		mech := scramMechName(d.Mechanism)
		switch {
		case errs[d.Name].ErrorCode != 0:
		case mech == "":
			fail(d.Name, kerr.UnsupportedSaslMechanism.Code, "unknown SCRAM mechanism")
		default:
			err := b.meta.DeleteScramCredential(ctx, d.Name, mech)
			switch {
			case errors.Is(err, metastore.ErrNotFound):
				fail(d.Name, kerr.ResourceNotFound.Code, "attempt to delete a user credential that does not exist")
			case err != nil:
				fail(d.Name, kerr.UnknownServerError.Code, err.Error())
			}
			changed = changed || err == nil
		}
	}
	for _, u := range req.Upsertions {
		mech := scramMechName(u.Mechanism)
		if errs[u.Name].ErrorCode != 0 {
			continue
		}
		if mech == "" {
			fail(u.Name, kerr.UnsupportedSaslMechanism.Code, "unknown SCRAM mechanism")
			continue
		}
		c, err := metastore.ScramCredentialFromSalted(u.Name, mech, u.Salt, u.Iterations, u.SaltedPassword)
		if err != nil {
			fail(u.Name, kerr.UnacceptableCredential.Code, err.Error())
			continue
		}
		if err := b.meta.PutScramCredential(ctx, c); err != nil {
			fail(u.Name, kerr.UnknownServerError.Code, err.Error())
		} else {
			changed = true
		}
	}
	for _, user := range order {
		resp.Results = append(resp.Results, *errs[user])
	}
	return resp
}

// authorizeAlterUserSCRAMCredentials is the ACL rule of AlterUserSCRAMCredentials.
func authorizeAlterUserSCRAMCredentials(a access, r *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, func(kmsg.Response)) {
	if mayManageCredentials(a.b, a.cc, opAlter) {
		return nil, nil
	}
	return alterSCRAMDenied(r), nil
}

// alterSCRAMDenied answers a request the principal may not make: every
// user named, CLUSTER_AUTHORIZATION_FAILED.
func alterSCRAMDenied(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, errClusterAuthz
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}
