package nexmark

// javaRandom is the linear congruential generator of java.util.Random
// (Knuth, TAOCP vol. 2, 3.2.1), so that an event's fields are the ones
// Beam's Nexmark generator draws for the same seed. Its zero value is not
// seeded; use newJavaRandom.
type javaRandom struct {
	seed int64
}

const (
	lcgMultiplier = 0x5DEECE66D
	lcgAddend     = 0xB
	lcgMask       = (1 << 48) - 1
)

func newJavaRandom(seed int64) javaRandom {
	return javaRandom{seed: (seed ^ lcgMultiplier) & lcgMask}
}

// next returns the next bits pseudo-random bits as a signed 32-bit value.
func (r *javaRandom) next(bits uint) int32 {
	r.seed = (r.seed*lcgMultiplier + lcgAddend) & lcgMask
	return int32(r.seed >> (48 - bits))
}

// nextInt returns a value in [0, bound); bound must be positive.
func (r *javaRandom) nextInt(bound int32) int32 {
	if bound&(-bound) == bound { // a power of two
		return int32((int64(bound) * int64(r.next(31))) >> 31)
	}
	for {
		bits := r.next(31)
		val := bits % bound
		// Reject the values of the last, incomplete range (the sum
		// overflows an int32 exactly then).
		if bits-val+(bound-1) >= 0 {
			return val
		}
	}
}

// nextInt32 returns a uniformly distributed int32.
func (r *javaRandom) nextInt32() int32 { return r.next(32) }

// nextLong returns a uniformly distributed int64 as Java builds it from two
// 32-bit draws.
func (r *javaRandom) nextLong() int64 {
	hi := int64(r.next(32))
	lo := int64(r.next(32))
	return (hi << 32) + lo
}

// nextDouble returns a value in [0, 1) with 53 random bits.
func (r *javaRandom) nextDouble() float64 {
	hi := int64(r.next(26))
	lo := int64(r.next(27))
	return float64((hi<<27)+lo) * (1.0 / (1 << 53))
}
