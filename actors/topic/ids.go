package topic

// Message IDs are 64-bit and carry their partition in bits 50–59, so any
// node can route a FIN or a lookup by ID alone. Within a partition they
// strictly increase and are never handed out twice, not even after a
// rollback: the generator only moves forward.

const partitionShift = 50

// MaxPartitions is the number of partitions an ID can name.
const MaxPartitions = 1024

// FirstID is the first ID a fresh partition hands out.
func FirstID(partition int32) uint64 {
	return uint64(partition)<<partitionShift + 1
}

// PartitionOf returns the partition an ID was issued by.
func PartitionOf(id uint64) int32 {
	return int32((id >> partitionShift) & (MaxPartitions - 1))
}
