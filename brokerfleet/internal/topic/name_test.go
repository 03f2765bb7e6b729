package topic_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string // substring of the error; "" means valid
	}{
		{name: "empty", input: "", wantErr: "empty"},
		{name: "dot", input: ".", wantErr: "reserved"},
		{name: "dot dot", input: "..", wantErr: "reserved"},
		{name: "three dots are allowed", input: "..."},
		{name: "max length", input: strings.Repeat("a", topic.MaxNameLen)},
		{name: "one over max length", input: strings.Repeat("a", topic.MaxNameLen+1), wantErr: "250 characters, the limit is 249"},
		{name: "far over max length", input: strings.Repeat("x", 1000), wantErr: "limit is 249"},
		{name: "single letter", input: "a"},
		{name: "single underscore", input: "_"},
		{name: "single dash", input: "-"},
		{name: "all allowed classes", input: "Orders.v2_EU-west-1"},
		{name: "digits only", input: "0123456789"},
		{name: "double dot inside", input: "a..b"},
		{name: "leading dot", input: ".hidden"},
		{name: "upper and lower case", input: "AbCdEfGhIjKlMnOpQrStUvWxYz"},
		{name: "slash", input: "a/b", wantErr: "'/'"},
		{name: "backslash", input: `a\b`, wantErr: `'\\'`},
		{name: "space", input: "a b", wantErr: "' '"},
		{name: "trailing space", input: "ab ", wantErr: "' '"},
		{name: "tab", input: "a\tb", wantErr: `'\t'`},
		{name: "NUL byte", input: "a\x00b", wantErr: `'\x00'`},
		{name: "non-ASCII letter", input: "caf\u00e9", wantErr: "allowed are ASCII letters"},
		{name: "plus", input: "a+b", wantErr: "'+'"},
		{name: "colon", input: "a:b", wantErr: "':'"},
		{name: "star", input: "a*", wantErr: "'*'"},
		{name: "comma", input: "a,b", wantErr: "','"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := topic.ValidateName(tt.input)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, topic.ErrInvalidName)
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// The length limit is reported even when the name also has bad characters.
func TestValidateNameLengthIsCheckedBeforeCharacters(t *testing.T) {
	err := topic.ValidateName(strings.Repeat("/", topic.MaxNameLen+1))
	require.ErrorIs(t, err, topic.ErrInvalidName)
	require.Contains(t, err.Error(), "limit is 249")
}
