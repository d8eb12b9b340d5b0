package httpapi

import (
	"net/http"

	"github.com/partitamq/partita/broker"
)

// disableWrite is youzan's nsqd /disable/write?type=: "all" stops this
// node writing to the partitions it leads, "ordered" only those of
// ordered topics, and "none" or no type takes writes again. youzan reads
// any other type as "none"; here it is refused, so a typo does not
// silently re-enable writes. It answers what is disabled now.
func (s *Server) disableWrite(w http.ResponseWriter, r *http.Request) {
	var off broker.WritesOff
	switch typ := r.URL.Query().Get("type"); typ {
	case "all":
		off = broker.WritesOffAll
	case "ordered":
		off = broker.WritesOffOrdered
	case "", "none":
		off = broker.WritesOn
	default:
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TYPE")
		return
	}
	s.Broker.DisableWrites(off)
	writeOK(w, map[string]string{"write_disabled": off.String()})
}
