package retry

import (
	"errors"
	"fmt"
	"strings"
)

// ErrForeignOrigin is returned (wrapped) when a record's origin header
// names another topic than the one the record's own topic belongs to. The
// records of X, X.retry and X.dlq may only name X: re-producing to any
// other origin would let whoever may write X.retry write every topic the
// retry worker or the DLQ console may write.
var ErrForeignOrigin = errors.New("retry: origin header names a foreign topic")

// OriginOf returns the topic the records of topic come from: X for
// X.retry and X.dlq, topic itself for any other topic.
func OriginOf(topic string) string {
	for _, suffix := range []string{RetrySuffix, DLQSuffix} {
		if o, ok := strings.CutSuffix(topic, suffix); ok && o != "" {
			return o
		}
	}
	return topic
}

// CheckOrigin reports whether st, read from a record of topic, may be
// acted on: its origin topic must be OriginOf(topic). Every re-produce
// (Router.Fail, DeadLetter, Redeliver, the DLQ console's replay) checks
// it; the error wraps ErrForeignOrigin.
func (st State) CheckOrigin(topic string) error {
	if want := OriginOf(topic); st.OriginTopic != want {
		return fmt.Errorf("%w: %s is %q on a record of %s, which may only name %q",
			ErrForeignOrigin, HeaderOriginTopic, st.OriginTopic, topic, want)
	}
	return nil
}
