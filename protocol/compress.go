package protocol

import (
	"compress/flate"
	"fmt"
	"io"

	"github.com/golang/snappy"
)

// FlushWriter is a connection writer that holds bytes back until Flush.
// After a compression upgrade every response must be followed by Flush, or
// the client never sees it.
type FlushWriter interface {
	io.Writer
	Flush() error
}

// UpgradeSnappy switches a connection to the snappy stream format (framed,
// as go-nsq expects) in both directions. conn's reader must include any bytes
// the session had already buffered; the returned reader is unbuffered.
func UpgradeSnappy(conn io.ReadWriter) (io.Reader, FlushWriter) {
	return snappy.NewReader(conn), snappy.NewBufferedWriter(conn)
}

// UpgradeDeflate switches a connection to raw DEFLATE (no zlib or gzip
// header) in both directions. Flush ends the current deflate block with a
// sync marker so the client can decode everything written so far.
func UpgradeDeflate(conn io.ReadWriter, level int) (io.Reader, FlushWriter, error) {
	w, err := flate.NewWriter(conn, level)
	if err != nil {
		return nil, nil, fmt.Errorf("deflate upgrade: %w", err)
	}
	return flate.NewReader(conn), w, nil
}
