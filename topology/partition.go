package topology

// Partition returns the partition of key among partitions, as Kafka's
// default partitioner places a record with a non-null key: murmur2 of the
// key, sign bit cleared, modulo partitions. Java clients, kcat (with
// -X partitioner=murmur2_random) and franz-go's StickyKeyPartitioner agree.
// A nil key is hashed like an empty one (Kafka would spread null keys
// instead). It panics if partitions <= 0, like a division by zero.
func Partition(key []byte, partitions int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % partitions
}

// murmur2 is Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c).
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		b = b[4:]
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
