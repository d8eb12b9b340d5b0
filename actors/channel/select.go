package channel

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// youzan's tag dispatch and ext filters, on ext topics. A message's tag is
// its header's "##client_dispatch_tag". A consumer with a desired tag takes
// only messages of that tag; one without takes untagged messages and those
// whose tag no consumer of the channel desires now. A consumer's filter
// (ext_filter) looks at one header key: a message it does not match is
// confirmed without being delivered, as youzan's consumer side does.
// Channels whose consumers have neither deliver as before.

// Selector is what one consumer selects.
type Selector struct {
	Tag    string
	Filter *Filter
}

func (s Selector) zero() bool { return s.Tag == "" && s.Filter == nil }

// FilterSpec is youzan's ext_filter as IDENTIFY carries it. Type 1 matches
// a header key's string value exactly, 2 by regular expression, 3 by glob;
// 4 combines exact matches of FilterDataList with FilterExtKey "all" or
// "any". Inverse delivers what does not match instead.
type FilterSpec struct {
	Type           int               `json:"type"`
	Inverse        bool              `json:"inverse"`
	FilterExtKey   string            `json:"filter_ext_key"`
	FilterData     string            `json:"filter_data"`
	FilterDataList []FilterSpecEntry `json:"filter_data_list"`
}

// FilterSpecEntry is one exact match of a type-4 filter.
type FilterSpecEntry struct {
	FilterExtKey string `json:"filter_ext_key"`
	FilterData   string `json:"filter_data"`
}

// Filter is a compiled FilterSpec; it is shared by the channel actors of
// every partition a consumer reads.
type Filter struct {
	inverse bool
	all     bool // type 4: every rule must match, else any
	rules   []filterRule
}

type filterRule struct {
	key   string
	equal string
	re    *regexp.Regexp // regex and glob rules
}

// Filter types, youzan's numbers.
const (
	FilterEqual = 1
	FilterRegex = 2
	FilterGlob  = 3
	FilterMulti = 4
)

// ErrBadFilter is wrapped by every error about a filter that cannot work.
var ErrBadFilter = errors.New("invalid ext_filter")

// NewFilter compiles spec; a spec of type 0 is no filter (nil).
func NewFilter(spec FilterSpec) (*Filter, error) {
	if spec.Type == 0 {
		return nil, nil
	}
	f := &Filter{inverse: spec.Inverse}
	if spec.FilterExtKey == "" {
		return nil, fmt.Errorf("%w: no filter_ext_key", ErrBadFilter)
	}
	if spec.Type != FilterMulti && spec.FilterData == "" {
		return nil, fmt.Errorf("%w: no filter_data", ErrBadFilter)
	}
	rule := filterRule{key: spec.FilterExtKey}
	var err error
	switch spec.Type {
	case FilterEqual:
		rule.equal = spec.FilterData
	case FilterRegex:
		rule.re, err = regexp.Compile(spec.FilterData)
	case FilterGlob:
		rule.re, err = globRegexp(spec.FilterData)
	case FilterMulti:
		if spec.FilterExtKey != "all" && spec.FilterExtKey != "any" {
			return nil, fmt.Errorf("%w: type 4 takes filter_ext_key all or any", ErrBadFilter)
		}
		if len(spec.FilterDataList) == 0 {
			return nil, fmt.Errorf("%w: type 4 without filter_data_list", ErrBadFilter)
		}
		f.all = spec.FilterExtKey == "all"
		for _, e := range spec.FilterDataList {
			if e.FilterExtKey == "" || e.FilterData == "" {
				return nil, fmt.Errorf("%w: empty entry in filter_data_list", ErrBadFilter)
			}
			f.rules = append(f.rules, filterRule{key: e.FilterExtKey, equal: e.FilterData})
		}
		return f, nil
	default:
		return nil, fmt.Errorf("%w: type %d", ErrBadFilter, spec.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadFilter, err)
	}
	f.rules = []filterRule{rule}
	f.all = true
	return f, nil
}

// globRegexp turns a glob (* any run, ? any one character, [...] a class,
// {a,b} alternatives) into an anchored regular expression.
func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^(?s:")
	depth := 0
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(glob[i:], ']')
			if j < 0 {
				return nil, errors.New("unclosed [ in glob")
			}
			class := glob[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				return nil, errors.New("unopened } in glob")
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, errors.New("unclosed { in glob")
	}
	b.WriteString(")$")
	return regexp.Compile(b.String())
}

// Match says whether a message with this header is delivered. A message
// without a header matches no filter, as in youzan.
func (f *Filter) Match(header []byte) bool {
	if len(header) == 0 {
		return f.inverse
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(header, &fields)
	matched := f.all
	for _, r := range f.rules {
		if r.match(fields) != f.all {
			matched = !f.all
			break
		}
	}
	return matched != f.inverse
}

// match looks at the key's value as a string; any other value is "" to an
// expression and never equal.
func (r filterRule) match(fields map[string]json.RawMessage) bool {
	var v string
	raw, ok := fields[r.key]
	isString := ok && json.Unmarshal(raw, &v) == nil
	if r.re == nil {
		return isString && v == r.equal
	}
	return r.re.MatchString(v)
}

// messageTag is a header's dispatch tag, "" for none.
func messageTag(header []byte) string {
	var h struct {
		Tag string `json:"##client_dispatch_tag"`
	}
	if json.Unmarshal(header, &h) != nil {
		return ""
	}
	return h.Tag
}

// Select records what a consumer selects; a zero Selector removes it.
func (c *Core) Select(consumer int64, s Selector) {
	if old, ok := c.selectors[consumer]; ok {
		delete(c.selectors, consumer)
		if old.Tag != "" {
			if c.tags[old.Tag]--; c.tags[old.Tag] == 0 {
				delete(c.tags, old.Tag)
			}
		}
	}
	if s.zero() {
		return
	}
	if c.selectors == nil {
		c.selectors, c.tags = make(map[int64]Selector), make(map[string]int)
	}
	c.selectors[consumer] = s
	if s.Tag != "" {
		c.tags[s.Tag]++
	}
}

// Filtered is how many messages filters confirmed without delivering.
func (c *Core) Filtered() int64 { return c.filtered }

// takes says whether a consumer selecting s takes a message of this tag.
func (c *Core) takes(s Selector, tag string) bool {
	if s.Tag != "" {
		return tag == s.Tag
	}
	return tag == "" || c.tags[tag] == 0
}

// takeSelected is Take for a channel with selecting consumers: it passes
// over what the consumer's tag does not take, leaving it queued, and
// confirms what its filter rejects. An ordered channel hands out only its
// first message.
func (c *Core) takeSelected(consumer int64, n int, now time.Time, timeout time.Duration) []Delivery {
	s := c.selectors[consumer]
	nowNs, dueNs := now.UnixNano(), now.Add(timeout).UnixNano()
	var out []Delivery
	limited := false // the rate limit stopped delivery
	for _, q := range []*[]*entry{&c.requeued, &c.ready} {
		kept := (*q)[:0]
		for i, e := range *q {
			// An ordered channel's first message is the first not
			// filtered out.
			if len(out) >= n || limited || (c.ordered && len(kept) > 0) {
				kept = append(kept, (*q)[i:]...)
				break
			}
			switch {
			case !c.takes(s, e.tag()):
				kept = append(kept, e)
			case s.Filter != nil && !s.Filter.Match(e.header()):
				c.filtered++
				c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
				c.advanceConfirmed()
			case !c.mayDeliver(e, nowNs):
				kept = append(kept, e)
				limited = true
			default:
				out = append(out, c.deliver(e, consumer, nowNs, dueNs))
			}
		}
		clear((*q)[len(kept):])
		*q = kept
		if limited || (c.ordered && len(kept) > 0) {
			break
		}
	}
	return out
}
