package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Options is the node's configuration as nsqd's /config/:opt shows and
// changes it: an option is named after its flag, with underscores
// (log_level for --log-level).
type Options interface {
	// Option is the option's current value, as JSON encodes it.
	Option(name string) (any, error)
	// SetOption changes an option on the running node and returns its new
	// value.
	SetOption(name string, value []byte) (any, error)
}

var (
	// ErrNoOption: no option has that name.
	ErrNoOption = errors.New("no such option")
	// ErrFixedOption: the option exists but takes effect only at start.
	ErrFixedOption = errors.New("the option changes only with a restart")
	// ErrOptionValue: the value is not one the option takes.
	ErrOptionValue = errors.New("invalid value")
)

// maxOptionBody bounds a PUT /config body: every option is a short value.
const maxOptionBody = 64 << 10

// config answers GET /config/:opt with the option's value, and PUT with
// the option changed, as nsqd does: 400 INVALID_OPTION for an option it
// does not have, 400 INVALID_VALUE for a value it does not take, 413
// INVALID_VALUE for an empty or oversized body. An option that exists but
// cannot change while the node runs is refused with 400
// OPTION_NOT_CHANGEABLE, where nsqd says INVALID_OPTION.
func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	if s.Options == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND")
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/config/")
	var v any
	var err error
	if r.Method == http.MethodPut {
		body, rerr := io.ReadAll(io.LimitReader(r.Body, maxOptionBody+1))
		if rerr != nil {
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
			return
		}
		if len(body) == 0 || len(body) > maxOptionBody {
			writeError(w, http.StatusRequestEntityTooLarge, "INVALID_VALUE")
			return
		}
		v, err = s.Options.SetOption(name, body)
	} else {
		v, err = s.Options.Option(name)
	}
	switch {
	case errors.Is(err, ErrNoOption):
		writeError(w, http.StatusBadRequest, "INVALID_OPTION")
	case errors.Is(err, ErrFixedOption):
		writeError(w, http.StatusBadRequest, "OPTION_NOT_CHANGEABLE")
	case errors.Is(err, ErrOptionValue):
		writeError(w, http.StatusBadRequest, "INVALID_VALUE")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	default:
		writeJSON(w, v)
	}
}

// youzanLevels are the names of youzan/nsq's numbered log levels, from
// its errors-only 0 up; its 4 (detail) is debug here too.
var youzanLevels = []string{"error", "warn", "info", "debug"}

// logLevelSet is youzan/nsq's POST /loglevel/set?loglevel=N: 0 errors
// only, 1 warnings, 2 information, 3 and up debug.
func (s *Server) logLevelSet(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query().Get("loglevel")
	if v == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_LEVEL")
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_LEVEL_STRING")
		return
	}
	if s.Options == nil {
		writeError(w, http.StatusNotFound, "NOT_FOUND")
		return
	}
	if _, err := s.Options.SetOption("log_level", []byte(youzanLevels[min(max(n, 0), len(youzanLevels)-1)])); err != nil {
		writeError(w, http.StatusBadRequest, "OPTION_NOT_CHANGEABLE")
		return
	}
	writeOK(w, nil)
}
