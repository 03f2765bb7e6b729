package metastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// pkACLs holds access control entries; sk is a digest of the entry, so
// creating an existing entry again is a no-op.
const pkACLs = "acls"

// ACL is one access control entry bound to a resource pattern. The numeric
// fields carry Kafka's wire codes (kmsg.ACLResourceType,
// ACLResourcePatternType, ACLOperation, ACLPermissionType), so nothing is
// translated between the protocol and the store.
type ACL struct {
	ResourceType int8   `json:"resourceType"` // 2 topic, 3 group, 4 cluster, 5 transactional id
	ResourceName string `json:"resourceName"` // "*" matches every name (literal pattern)
	PatternType  int8   `json:"patternType"`  // 3 literal, 4 prefixed
	Principal    string `json:"principal"`    // "User:alice", or "User:*"
	Host         string `json:"host"`         // "*" or an IP address
	Operation    int8   `json:"operation"`    // 2 all, 3 read, 4 write, ...
	Permission   int8   `json:"permission"`   // 2 deny, 3 allow
}

func aclKey(a ACL) Key {
	sum := sha256.Sum256(encodeJSON(a))
	return Key{PK: pkACLs, SK: hex.EncodeToString(sum[:])}
}

// CreateACLs stores the entries (existing ones stay as they are) and
// records a change, so brokers reload them.
func (m *Meta) CreateACLs(ctx context.Context, acls []ACL) error {
	for _, a := range acls {
		if _, err := m.s.Put(ctx, Item{Key: aclKey(a), Value: encodeJSON(a)}, Always); err != nil {
			return fmt.Errorf("metastore: create acl: %w", err)
		}
	}
	return m.bump(ctx)
}

// DeleteACLs removes the entries (absent ones are ignored) and records a
// change.
func (m *Meta) DeleteACLs(ctx context.Context, acls []ACL) error {
	for _, a := range acls {
		if err := m.s.Delete(ctx, aclKey(a), Always); err != nil {
			return fmt.Errorf("metastore: delete acl: %w", err)
		}
	}
	return m.bump(ctx)
}

// ACLs lists every stored entry.
func (m *Meta) ACLs(ctx context.Context) ([]ACL, error) {
	items, err := m.s.Query(ctx, pkACLs, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list acls: %w", err)
	}
	out := make([]ACL, 0, len(items))
	for _, it := range items {
		var a ACL
		if err := decodeJSON(it, &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
