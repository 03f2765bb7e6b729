package topic

import (
	"errors"
	"fmt"
	"strings"
)

// MaxNameLen is the longest topic name Kafka accepts.
const MaxNameLen = 249

// ErrInvalidName is returned when a topic name breaks Kafka's naming rules.
var ErrInvalidName = errors.New("invalid topic name")

// ValidateName checks a topic name against Kafka's rules: 1 to 249 characters
// from [a-zA-Z0-9._-], and neither "." nor "..".
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is reserved", ErrInvalidName, name)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d characters, the limit is %d", ErrInvalidName, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q; allowed are ASCII letters, digits, '.', '_' and '-'", ErrInvalidName, name, c)
		}
	}
	return nil
}

// CollisionKey maps '.' to '_': Kafka refuses two topics with the same
// key, because their metric names would collide.
func CollisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }
