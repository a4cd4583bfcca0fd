/*
 * test_views.c: dependency tracking by the memory a strided view really touches (the issue's
 * refinement of the seed's TensorMap key), on tiles of one column-major 16x16 double matrix
 * A (element (r, c) at A[r + 16 c]).
 *
 *  - column blocks 0-3 and 8-11 (shape {16,4}, strides {1,16}) do not depend on each other:
 *    both INOUT writers must be running at the same time (a rendezvous that deadlocks, and
 *    times out, if an edge existed);
 *  - 4x4 tiles at rows 0-3 and 8-11 of columns 0-3 are independent although their byte
 *    ranges interleave; tiles that do overlap (rows 0-7 and 4-11) are ordered;
 *  - a reader of the whole buffer depends on every live writer of any part, whatever data
 *    pointer each view used;
 *  - a new write replaces only the writers it fully covers: a reader of the part it did not
 *    cover still waits for the partly overwritten writer, a reader of the covered part does
 *    not;
 *  - a same-pointer whole-buffer INOUT chain is serial.
 */
#include "harness.h"

#define LD 16
#define COL(c) ((uint64_t)(c) * LD * sizeof(double))
#define AT(r, c) (((uint64_t)(r) + (uint64_t)(c) * LD) * sizeof(double))

static double A[LD * LD];
static dagrt_worker_t *W;
static dagrt_orch_t *O;

static int setup(void)
{
    memset(A, 0, sizeof A);
    return h_open_worker(&W, &O, NULL, 4, 0);
}

static void teardown(void)
{
    h_close_fixture(W, O);
}

static dagrt_tensor whole(uint32_t tag)
{
    dagrt_tensor t;
    uint64_t shape[2] = {LD, LD};
    if (dagrt_tensor_init(&t, A, DAGRT_DTYPE_F64, 2, shape, tag) != DAGRT_STATUS_OK)
        H_FAIL("tensor_init: %s", dagrt_last_error());
    return t;
}

static void test_column_blocks_independent(void)
{
    dagrt_run_id run;
    dagrt_tensor t0 = whole(DAGRT_TAG_OUTPUT);
    dagrt_tensor ta = h_tile(A, COL(0), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_INOUT);
    dagrt_tensor tb = h_tile(A, COL(8), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_INOUT);
    dagrt_tensor tr = whole(DAGRT_TAG_INPUT);
    h_step w0 = h_op_step(1, H_OP_FILL, 1), a = h_op_step(2, H_OP_APPEND, 2),
           b = h_op_step(3, H_OP_APPEND, 3), r = h_op_step(4, H_OP_READ, 0);
    w0.sleep_us = 10000;
    a.barrier = b.barrier = 0;
    a.barrier_n = b.barrier_n = 2;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 4,
                       (h_step_tensor[]){{&w0, &t0}, {&a, &ta}, {&b, &tb}, {&r, &tr}});
    CHECK_BEFORE(1, 2); /* both blocks overlap the whole-matrix writer */
    CHECK_BEFORE(1, 3);
    CHECK_BEFORE(2, 4); /* and the whole-matrix reader waits for both */
    CHECK_BEFORE(3, 4);
    for (int c = 0; c < LD; c++)
        for (int rr = 0; rr < LD; rr++) {
            double want = (c < 4) ? 12 : (c >= 8 && c < 12) ? 13 : 1;
            CHECKF(A[rr + LD * c] == want, "A(%d,%d) = %g, expected %g", rr, c, A[rr + LD * c],
                   want);
        }
    CHECK(h_read[4] == 64 * 12 + 64 * 13 + 128 * 1);
    teardown();
}

static void test_interleaved_tiles_independent(void)
{
    dagrt_run_id run;
    dagrt_tensor t0 = whole(DAGRT_TAG_OUTPUT);
    /* rows 0-3 and rows 8-11 of columns 0-3: byte ranges [0, 3*128+32) and [64, 3*128+96)
     * interleave, the elements do not */
    dagrt_tensor ta = h_tile(A, AT(0, 0), DAGRT_DTYPE_F64, 4, 4, LD, DAGRT_TAG_INOUT);
    dagrt_tensor tb = h_tile(A, AT(8, 0), DAGRT_DTYPE_F64, 4, 4, LD, DAGRT_TAG_INOUT);
    /* and the tile beside it (rows 0-3, columns 4-7), through another data pointer */
    dagrt_tensor tc = h_tile(&A[4 * LD], 0, DAGRT_DTYPE_F64, 4, 4, LD, DAGRT_TAG_INOUT);
    h_step w0 = h_op_step(10, H_OP_FILL, 1), a = h_op_step(11, H_OP_APPEND, 2),
           b = h_op_step(12, H_OP_APPEND, 3), c = h_op_step(13, H_OP_APPEND, 4);
    a.barrier = b.barrier = c.barrier = 1;
    a.barrier_n = b.barrier_n = c.barrier_n = 3;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 4,
                       (h_step_tensor[]){{&w0, &t0}, {&a, &ta}, {&b, &tb}, {&c, &tc}});
    CHECK_BEFORE(10, 11);
    CHECK_BEFORE(10, 12);
    CHECK_BEFORE(10, 13);
    CHECK(A[0 + LD * 0] == 12 && A[3 + LD * 3] == 12);
    CHECK(A[8 + LD * 0] == 13 && A[11 + LD * 3] == 13);
    CHECK(A[0 + LD * 4] == 14 && A[3 + LD * 7] == 14);
    CHECK(A[4 + LD * 0] == 1 && A[12 + LD * 3] == 1 && A[4 + LD * 4] == 1);
    teardown();
}

static void test_overlapping_tiles_ordered(void)
{
    dagrt_run_id run;
    /* rows 0-7 and rows 4-11 of columns 2-5 share rows 4-7 */
    dagrt_tensor ta = h_tile(A, AT(0, 2), DAGRT_DTYPE_F64, 8, 4, LD, DAGRT_TAG_OUTPUT);
    dagrt_tensor tb = h_tile(A, AT(4, 2), DAGRT_DTYPE_F64, 8, 4, LD, DAGRT_TAG_INOUT);
    /* a single element of the shared part, through a pointer into the middle of A */
    dagrt_tensor tc = h_tensor(&A[5 + LD * 3], 1, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
    h_step a = h_op_step(20, H_OP_FILL, 1), b = h_op_step(21, H_OP_APPEND, 2),
           c = h_op_step(22, H_OP_READ, 0);
    a.sleep_us = 20000;
    b.sleep_us = 10000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_submit_one_per_lane(O, 3, (h_step_tensor[]){{&a, &ta}, {&b, &tb}, {&c, &tc}});
    EXPECT_OK(h_finish_run(W, O, run));
    CHECK_BEFORE(20, 21);
    CHECK_BEFORE(21, 22);
    CHECK(A[0 + LD * 2] == 1);          /* only a */
    CHECK(A[5 + LD * 3] == 12);         /* a then b */
    CHECK(A[10 + LD * 5] == 2);         /* only b (0 * 10 + 2) */
    CHECKF(h_read[22] == 12, "element reader saw %g, expected 12", h_read[22]);
    teardown();
}

static void test_whole_reader_waits_for_every_writer(void)
{
    dagrt_run_id run;
    static const int tiles[4][2] = {{0, 0}, {4, 4}, {8, 12}, {12, 0}};
    static const uint64_t sleeps[4] = {5000, 25000, 15000, 10000};
    dagrt_tensor tw[4], tr = whole(DAGRT_TAG_INPUT);
    /* column 4 through a pointer to its first element: overlaps tile (4,4) only */
    dagrt_tensor tcol = h_tensor(&A[4 * LD], LD, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
    h_step r = h_op_step(35, H_OP_READ, 0), rc = h_op_step(36, H_OP_READ, 0);
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    for (int k = 0; k < 4; k++) {
        h_step w = h_op_step(30 + (uint64_t)k, H_OP_FILL, (uint64_t)k + 1);
        w.sleep_us = sleeps[k];
        tw[k] = h_tile(A, AT(tiles[k][0], tiles[k][1]), DAGRT_DTYPE_F64, 4, 4, LD,
                       DAGRT_TAG_OUTPUT);
        SUBMIT_STEP(O, &w, k, &tw[k], 1, NULL, 0, NULL);
    }
    SUBMIT_STEP(O, &r, 0, &tr, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &rc, 2, &tcol, 1, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(W, O, run));
    for (int k = 0; k < 4; k++) {
        CHECK_RAN_ONCE(30 + k);
        CHECK_BEFORE(30 + k, 35);
    }
    CHECK_BEFORE(31, 36);
    CHECK_RAN_ONCE(35);
    CHECKF(h_read[35] == 16.0 * (1 + 2 + 3 + 4), "whole reader saw %g, expected 160",
           h_read[35]);
    CHECKF(h_read[36] == 4.0 * 2, "column reader saw %g, expected 8", h_read[36]);
    teardown();
}

/* W1 writes columns 0-7; W2 overwrites columns 0-3 only, so W1 keeps its TensorMap entry: a
 * reader of columns 4-7 (the part W2 did not cover) still waits for W1, and a reader of
 * columns 0-3 waits for W2. (Whether that reader also waits for W1 is left open: the map may
 * conservatively keep W1's whole footprint.) */
static void test_partial_overwrite_keeps_old_writer(void)
{
    dagrt_run_id run;
    dagrt_tensor t1 = h_tile(A, COL(0), DAGRT_DTYPE_F64, 16, 8, LD, DAGRT_TAG_OUTPUT);
    dagrt_tensor t2 = h_tile(A, COL(0), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_OUTPUT);
    dagrt_tensor tu = h_tile(A, COL(4), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_INPUT);
    dagrt_tensor tc = h_tile(A, COL(0), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_INPUT);
    /* one element of column 6, through a pointer to it */
    dagrt_tensor te = h_tensor(&A[3 + LD * 6], 1, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
    h_step w1 = h_op_step(40, H_OP_NONE, 0), w2 = h_op_step(41, H_OP_FILL, 5),
           ru = h_op_step(42, H_OP_READ, 0), rc = h_op_step(43, H_OP_READ, 0),
           re = h_op_step(44, H_OP_READ, 0);
    w1.sleep_us = 30000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_submit_one_per_lane(O, 4,
                          (h_step_tensor[]){{&w1, &t1}, {&w2, &t2}, {&ru, &tu}, {&rc, &tc}});
    SUBMIT_STEP(O, &re, 1, &te, 1, NULL, 0, NULL); /* lane 1 again */
    EXPECT_OK(h_finish_run(W, O, run));
    for (int i = 40; i < 45; i++)
        CHECK_RAN_ONCE(i);
    CHECK_BEFORE(40, 42); /* uncovered part: still W1's */
    CHECK_BEFORE(40, 44);
    CHECK_BEFORE(41, 43);
    teardown();
}

/* W3 writes columns 8-11; W4 writes columns 8-15, covering W3 entirely: readers of columns
 * 8-11 depend on W4 only. */
static void test_full_overwrite_replaces_old_writer(void)
{
    dagrt_run_id run;
    dagrt_tensor t3 = h_tile(A, COL(8), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_OUTPUT);
    dagrt_tensor t4 = h_tile(A, COL(8), DAGRT_DTYPE_F64, 16, 8, LD, DAGRT_TAG_OUTPUT);
    dagrt_tensor tr = h_tile(A, COL(8), DAGRT_DTYPE_F64, 16, 4, LD, DAGRT_TAG_INPUT);
    /* a 4x4 tile of W3's old region through a strided view */
    dagrt_tensor tt = h_tile(A, AT(4, 9), DAGRT_DTYPE_F64, 4, 2, LD, DAGRT_TAG_INPUT);
    h_step w3 = h_step_id(50), w4 = h_op_step(51, H_OP_FILL, 6),
           r = h_op_step(52, H_OP_READ, 0), rt = h_op_step(53, H_OP_READ, 0);
    w3.wait_gate = 1;
    r.open_at_start = 1;
    w4.sleep_us = 5000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 4,
                       (h_step_tensor[]){{&w3, &t3}, {&w4, &t4}, {&r, &tr}, {&rt, &tt}});
    CHECK_BEFORE(51, 52);
    CHECK_BEFORE(51, 53);
    CHECKF(h_start(52) < h_end(50), "the reader waited for the fully overwritten writer");
    CHECK(h_read[52] == 6.0 * 64);
    CHECK(h_read[53] == 6.0 * 8);
    teardown();
}

static void test_same_pointer_chain(void)
{
    dagrt_run_id run;
    dagrt_tensor t = whole(DAGRT_TAG_INOUT);
    dagrt_tensor t1 = h_tensor(A, LD * LD, DAGRT_DTYPE_F64, DAGRT_TAG_INOUT); /* 1-D, same bytes */
    dagrt_tensor tr = whole(DAGRT_TAG_INPUT);
    h_step r = h_op_step(65, H_OP_READ, 0);
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    for (int i = 0; i < 5; i++) {
        h_step s = h_op_step(60 + (uint64_t)i, H_OP_APPEND, (uint64_t)i + 1);
        s.sleep_us = 2000;
        SUBMIT_STEP(O, &s, i % 4, (i % 2) ? &t1 : &t, 1, NULL, 0, NULL);
    }
    SUBMIT_STEP(O, &r, 1, &tr, 1, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(W, O, run));
    for (int i = 1; i < 5; i++)
        CHECK_BEFORE(60 + i - 1, 60 + i);
    CHECK_BEFORE(64, 65);
    for (int i = 0; i < LD * LD; i++)
        if (A[i] != 12345) {
            H_FAIL("A[%d] = %g, expected 12345", i, A[i]);
            break;
        }
    CHECK(h_read[65] == 12345.0 * LD * LD);
    teardown();
}

int main(void)
{
    h_begin("views", 90);
    RUN_TEST(test_column_blocks_independent);
    RUN_TEST(test_interleaved_tiles_independent);
    RUN_TEST(test_overlapping_tiles_ordered);
    RUN_TEST(test_whole_reader_waits_for_every_writer);
    RUN_TEST(test_partial_overwrite_keeps_old_writer);
    RUN_TEST(test_full_overwrite_replaces_old_writer);
    RUN_TEST(test_same_pointer_chain);
    return h_done();
}
