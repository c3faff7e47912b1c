/* A ping-pong that checks every byte, then an allreduce that checks its sum: the MPI traffic of
 * tests/mpi/mpi_test.py, whose two ranks Open MPI carries over UCX on srdma0.
 *
 * usage: mpi_check [ITERATIONS]   (run as exactly 2 ranks; default 100 round trips per size)
 *
 * Exits 0 with one line per size and one for the allreduce, or 1 naming the first byte that
 * came back wrong. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small (eager), page-sized, and large enough for UCX's rendezvous protocol. */
static const int kSizes[] = {8, 4096, 65536, 1 << 20};
enum { kReduceLength = 1024 };

/* The byte at OFFSET of round trip ITER's message, and what the echo makes of it. */
static unsigned char pattern(int iter, size_t offset) { return (unsigned char)(iter * 31 + offset * 7 + 1); }
static unsigned char echoed(unsigned char b) { return (unsigned char)(b ^ 0xA5); }

static int first_wrong(const unsigned char *buf, int size, int iter, int after_echo) {
  for (int i = 0; i < size; ++i) {
    const unsigned char want = after_echo ? echoed(pattern(iter, (size_t)i)) : pattern(iter, (size_t)i);
    if (buf[i] != want) return i;
  }
  return -1;
}

static int fail(int rank, const char *what, int size, int iter, int offset) {
  fprintf(stderr, "mpi_check: rank %d: %s: size %d, round trip %d, byte %d is wrong\n", rank, what, size, iter, offset);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

/* Rank 0 sends the pattern; rank 1 checks it and sends it back transformed; rank 0 checks that. */
static int ping_pong(int rank, int size, int iterations, unsigned char *buf) {
  const double start = MPI_Wtime();
  for (int iter = 0; iter < iterations; ++iter) {
    if (rank == 0) {
      for (int i = 0; i < size; ++i) buf[i] = pattern(iter, (size_t)i);
      MPI_Send(buf, size, MPI_UNSIGNED_CHAR, 1, iter, MPI_COMM_WORLD);
      MPI_Recv(buf, size, MPI_UNSIGNED_CHAR, 1, iter, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const int wrong = first_wrong(buf, size, iter, 1);
      if (wrong >= 0) return fail(rank, "echo", size, iter, wrong);
    } else {
      memset(buf, 0, (size_t)size);
      MPI_Recv(buf, size, MPI_UNSIGNED_CHAR, 0, iter, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const int wrong = first_wrong(buf, size, iter, 0);
      if (wrong >= 0) return fail(rank, "ping", size, iter, wrong);
      for (int i = 0; i < size; ++i) buf[i] = echoed(buf[i]);
      MPI_Send(buf, size, MPI_UNSIGNED_CHAR, 0, iter, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    const double usec = (MPI_Wtime() - start) * 1e6 / iterations;
    printf("mpi_check: %d round trips of %d bytes checked, %.1f usec each\n", iterations, size, usec);
  }
  return 0;
}

/* Each rank adds (rank + 1) * (i + 1) at index i: the sum is (i + 1) * ranks * (ranks + 1) / 2. */
static int allreduce(int rank, int ranks) {
  int64_t mine[kReduceLength], sum[kReduceLength];
  for (int i = 0; i < kReduceLength; ++i) mine[i] = (int64_t)(rank + 1) * (i + 1);
  MPI_Allreduce(mine, sum, kReduceLength, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < kReduceLength; ++i) {
    const int64_t want = (int64_t)(i + 1) * ranks * (ranks + 1) / 2;
    if (sum[i] != want) {
      fprintf(stderr, "mpi_check: rank %d: allreduce element %d is %lld, not %lld\n", rank, i, (long long)sum[i],
              (long long)want);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
  }
  if (rank == 0) printf("mpi_check: allreduce of %d int64 over %d ranks checked\n", kReduceLength, ranks);
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int iterations = argc > 1 ? atoi(argv[1]) : 100;
  if (ranks != 2 || iterations <= 0) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 mpi_check [ITERATIONS > 0]\n");
    MPI_Finalize();
    return 2;
  }
  unsigned char *buf = malloc((size_t)kSizes[sizeof kSizes / sizeof kSizes[0] - 1]);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  int failed = 0;
  for (size_t s = 0; s < sizeof kSizes / sizeof kSizes[0] && !failed; ++s) {
    failed = ping_pong(rank, kSizes[s], iterations, buf);
  }
  if (!failed) failed = allreduce(rank, ranks);
  free(buf);
  MPI_Finalize();
  return failed;
}
