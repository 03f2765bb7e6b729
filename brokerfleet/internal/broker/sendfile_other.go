//go:build !linux

package broker

import (
	"errors"
	"io"
	"net"

	"github.com/stratamq/strata/pkg/segment"
)

// Only Linux sends record sets with sendfile (sendfile_linux.go).

func zeroCopyConn(net.Conn) bool { return false }

var hole []byte

func sendSpan(io.Writer, *segment.Span) error { return errors.ErrUnsupported }

func cork(io.Writer) func() { return func() {} }
