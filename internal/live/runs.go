package live

import "iter"

// pack is items with their frames copied into one block (one allocation
// per publication), so a whole-log subscriber writes a publication as
// one run of bytes shared with every other (Runs). Execution
// subscribers keep the records' own frames: one of them holding a few
// records does not hold a whole publication's block.
func pack(items []Item) []Item {
	total := 0
	for _, it := range items {
		total += len(it.Frame)
	}
	block := make([]byte, 0, total)
	out := make([]Item, len(items))
	for i, it := range items {
		off := len(block)
		block = append(block, it.Frame...)
		out[i] = Item{Seq: it.Seq, Frame: block[off:len(block):len(block)], off: off}
	}
	for i := range out {
		out[i].block = block
	}
	return out
}

// Runs yields the frames of items (as Take returned them) joined where
// they are adjacent in one publication's block: a writer sends each run
// as it is (read it, do not modify it), one write per publication rather
// than a copy of every frame into a buffer of its own.
func Runs(items []Item) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := 0; i < len(items); {
			it := items[i]
			if cap(it.block) == 0 { // an execution's, or an empty block
				if !yield(it.Frame) {
					return
				}
				i++
				continue
			}
			end := it.off + len(it.Frame)
			j := i + 1
			for ; j < len(items); j++ {
				n := items[j]
				if cap(n.block) == 0 || &n.block[:1][0] != &it.block[:1][0] || n.off != end {
					break
				}
				end += len(n.Frame)
			}
			if !yield(it.block[it.off:end:end]) {
				return
			}
			i = j
		}
	}
}
