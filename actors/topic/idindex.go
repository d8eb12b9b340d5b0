package topic

import "math/bits"

// idIndex finds the ring slots of the dedupe window's IDs by hash: open
// addressing with linear probing over a power-of-two table kept at most
// half full, and deletion by moving the rest of a probe run back, so a
// table that keeps taking new IDs and dropping old ones never fills with
// tombstones. A slot is one word: the hash's low 32 bits, which also give
// its home, and the ring slot + 1 (0 is an empty slot). A new ID, the
// common case, costs one probe run, usually one cache line; the caller
// checks a candidate against the ring, since 32 bits of hash may match
// another ID.
type idIndex struct {
	slots []uint64
	mask  uint64
}

// newIDIndex makes an index for at most n ring slots.
func newIDIndex(n int) idIndex {
	size := uint64(1) << bits.Len64(uint64(2*n-1))
	return idIndex{slots: make([]uint64, size), mask: size - 1}
}

func indexSlot(h uint64, ring int) uint64 { return h<<32 | uint64(ring+1) }

func (x *idIndex) home(slot uint64) uint64 { return slot >> 32 & x.mask }

// each calls f with the ring slot of every entry whose hash may be h.
func (x *idIndex) each(h uint64, f func(ring int)) {
	tag := h << 32
	for i := h & x.mask; x.slots[i] != 0; i = (i + 1) & x.mask {
		if s := x.slots[i]; s&^0xffffffff == tag {
			f(int(uint32(s)) - 1)
		}
	}
}

// insert adds ring slot ring under hash h.
func (x *idIndex) insert(h uint64, ring int) {
	i := h & x.mask
	for x.slots[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = indexSlot(h, ring)
}

// remove takes ring slot ring, added under hash h, out of the index.
func (x *idIndex) remove(h uint64, ring int) {
	want := indexSlot(h, ring)
	i := h & x.mask
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return
		}
		i = (i + 1) & x.mask
	}
	// Close the gap: a later slot of the run whose home is not between
	// the gap and it moves into the gap.
	for j := i; ; {
		j = (j + 1) & x.mask
		s := x.slots[j]
		if s == 0 {
			break
		}
		k := x.home(s)
		if i <= j && i < k && k <= j || i > j && (i < k || k <= j) {
			continue
		}
		x.slots[i] = s
		i = j
	}
	x.slots[i] = 0
}
