/* build.c: a graph to what the runtime loads: the pipeline (pipeline_run, build.h) that
 * the command line and gpucc_build share: dims bound, passes, codegen, the memory plan,
 * NVRTC, then the plan's byte form and the weights blob.
 *
 * The memory plan: inputs and outputs in slots of their own at the start of the arena
 * (a run copies into and out of them; timed replays read them again), intermediates
 * above them, each into the best-fitting gap left by the buffers whose lifetimes overlap
 * its own, in the best of four orders (largest, earliest, largest area, longest-lived first).
 * Before that, a pointwise kernel's output takes the buffer of an input that dies in it
 * (share_in_place). */
#include "compiler/build.h"
#include "compiler/gpucc.h"
#include "compiler/nvrtc.h"
#include "passes/passes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* PLAN_SHUFFLES: placements tried after the four orders, each the best so far with some
 * buffers swapped (deterministic), while the arena is above its lower bound. PLAN_PAIRS
 * and PLAN_WORK bound what placing in orders other than earliest first may look at (see
 * place_intermediates): far more than a real model's plan needs, and a fraction of a
 * second at most. */
enum { MAX_PASSES = 64, WEIGHTS_ALIGN = 256, PLAN_SHUFFLES = 200, PLAN_PAIRS = 1 << 20,
       PLAN_WORK = 1 << 25 };

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t value_bytes(const Value *v) {
  int64_t n = shape_numel(&v->type.shape);
  return n > 0 ? (uint64_t)n * dtype_size(v->type.dtype) : 0;
}

int step_nvalues(const Step *s) {
  switch (s->kind) {
  case STEP_KERNEL: return s->kernel.nargs;
  case STEP_GEMM: return 3 + (s->gemm.c != NULL) + (s->gemm.bias != NULL);
  case STEP_ALIAS: return 2;
  case STEP_CHOICE: return 0; /* its variants' steps follow it */
  }
  return 0;
}

const Value *step_value(const Step *s, int i) {
  switch (s->kind) {
  case STEP_KERNEL: return s->kernel.args[i];
  case STEP_GEMM:
    return i == 0 ? s->gemm.a : i == 1 ? s->gemm.b : i == 2 ? s->gemm.d
           : i == 3 && s->gemm.c ? s->gemm.c : s->gemm.bias;
  case STEP_ALIAS: return i == 0 ? s->alias.in : s->alias.out;
  case STEP_CHOICE: break;
  }
  return NULL;
}

/* ---------------------------------------------------------------- memory plan: uses */

static MemSlot *slot_of(MemPlan *mp, const Value *v) { return &mp->slot[v->id]; }

/* Registers v (as its own root unless already known) and extends its root's live range
 * to step i (-1: a graph input or output, live from start to end anyway). */
static int note_use(MemPlan *mp, const Value *v, int i, Diag *d) {
  if (!v || v->id < 0 || v->id >= mp->nslots)
    return diag_error(d, (SrcLoc){0}, "internal error: a step refers to a value outside the graph");
  MemSlot *s = slot_of(mp, v);
  if (!s->v) {
    s->v = v;
    s->root = v;
  }
  MemSlot *r = slot_of(mp, s->root);
  if (i >= 0 && (r->first < 0 || i < r->first))
    r->first = i;
  if (i > r->last)
    r->last = i;
  return 0;
}

static int note_steps(const Program *p, MemPlan *mp, Diag *d) {
  for (int i = 0; i < p->nsteps; i++) {
    const Step *s = &p->steps[i];
    if (s->kind == STEP_ALIAS) {
      /* The output is the input's buffer: same root, and the root lives as long as
       * either is used. */
      if (note_use(mp, s->alias.in, i, d))
        return -1;
      MemSlot *o = slot_of(mp, s->alias.out);
      o->v = s->alias.out;
      o->root = slot_of(mp, s->alias.in)->root;
      if (note_use(mp, s->alias.out, i, d))
        return -1;
      continue;
    }
    for (int k = 0; k < step_nvalues(s); k++) {
      const Value *v = step_value(s, k);
      if (note_use(mp, v, i, d))
        return -1;
      const Value *r = slot_of(mp, v)->root;
      if (r->kind == VK_CONST)
        mp->weights_used[r->id] = true;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- memory plan: places */

static int by_size(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  if (a->bytes != b->bytes)
    return a->bytes > b->bytes ? -1 : 1;
  if (a->first != b->first)
    return a->first < b->first ? -1 : 1;
  return a->v->id - b->v->id;
}

static int by_offset(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  return (a->offset > b->offset) - (a->offset < b->offset);
}

/* The offset for s among the placed buffers that are live when it is (sorted by offset):
 * the smallest gap at or above base that holds it (best fit), else the end. */
static uint64_t best_fit(MemSlot *const *conflict, int n, uint64_t base, uint64_t bytes) {
  uint64_t at = base, best = UINT64_MAX, best_gap = UINT64_MAX;
  for (int i = 0; i < n; i++) {
    if (conflict[i]->offset >= at + bytes && conflict[i]->offset - at < best_gap) {
      best = at;
      best_gap = conflict[i]->offset - at;
    }
    uint64_t end = align_up(conflict[i]->offset + conflict[i]->bytes, GPUCC_ARENA_ALIGN);
    if (end > at)
      at = end;
  }
  return best != UINT64_MAX ? best : at;
}

/* The intermediates to place: slot[k] has compact index k. The buffers that overlap
 * buffer k (live at a step it is live at) are adj[start[k] .. start[k + 1]), by compact
 * index, when list_overlaps could list them; placing in an order takes the ones placed
 * before it. */
typedef struct Place {
  MemSlot **slot;
  int n;
  int *start, *adj; /* NULL: more overlaps than PLAN_PAIRS, not listed */
  int *rank;        /* by compact index: the position in the order being placed */
  int *index;       /* by value id: the compact index */
  MemSlot **conflict;
  uint64_t base;
  long work;        /* overlaps looked at, over every order placed */
} Place;

/* Places todo[0..n) in that order, each at its best fit among the buffers placed before
 * it that it overlaps; returns the arena's end. */
static uint64_t place_in_order(Place *pl, MemSlot **todo) {
  uint64_t end = pl->base;
  for (int i = 0; i < pl->n; i++)
    pl->rank[pl->index[todo[i]->v->id]] = i;
  for (int i = 0; i < pl->n; i++) {
    MemSlot *s = todo[i];
    int k = pl->index[s->v->id], nc = 0;
    for (int e = pl->start[k]; e < pl->start[k + 1]; e++)
      if (pl->rank[pl->adj[e]] < i)
        pl->conflict[nc++] = pl->slot[pl->adj[e]];
    pl->work += pl->start[k + 1] - pl->start[k];
    qsort(pl->conflict, (size_t)nc, sizeof *pl->conflict, by_offset);
    s->offset = best_fit(pl->conflict, nc, pl->base, s->bytes);
    if (s->offset + s->bytes > end)
      end = s->offset + s->bytes;
  }
  return end;
}

static int by_first(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  if (a->first != b->first)
    return a->first < b->first ? -1 : 1;
  return by_size(pa, pb);
}

static int by_last(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  return (a->last > b->last) - (a->last < b->last);
}

/* Longest live range first. */
static int by_length(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  if (a->last - a->first != b->last - b->first)
    return a->last - a->first > b->last - b->first ? -1 : 1;
  return by_size(pa, pb);
}

/* Bytes times steps live: the buffers that block the most of the arena's area first. */
static int by_area(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  uint64_t x = a->bytes * (uint64_t)(a->last - a->first + 1);
  uint64_t y = b->bytes * (uint64_t)(b->last - b->first + 1);
  if (x != y)
    return x > y ? -1 : 1;
  return by_size(pa, pb);
}

/* ------------------------------------------------ earliest first, as a sweep over steps
 *
 * In the order of first use, the buffers placed before s that overlap it are exactly
 * those still live at s's first step, and they are live together, so they never share a
 * byte: they are the arena at that step, with gaps between them. Best fit is then the
 * smallest gap (lowest first among equals), kept in a treap by (size, start) as buffers
 * come and go: O(n log n), the same offsets place_in_order gives that order, whatever the
 * overlaps. */

typedef struct Gap {
  uint64_t size, start;
  uint32_t prio;
  int left, right; /* treap children (indices into the pool), -1: none */
  int above;       /* the live buffer that starts where the gap ends (compact index) */
} Gap;

typedef struct Sweep {
  Gap *pool;
  int *free_list, nfree, used;
  int root;
  int *prev, *next; /* by compact index: neighbours in the arena among the live buffers */
  int tail;         /* the live buffer highest in the arena, -1: none */
} Sweep;

static int gap_cmp(uint64_t size, uint64_t start, const Gap *g) {
  if (size != g->size)
    return size < g->size ? -1 : 1;
  return (start > g->start) - (start < g->start);
}

/* The treap split: keys below (size, start) to *l, the others to *r. */
static void gap_split(Sweep *sw, int t, uint64_t size, uint64_t start, int *l, int *r) {
  if (t < 0) {
    *l = *r = -1;
    return;
  }
  Gap *g = &sw->pool[t];
  if (gap_cmp(size, start, g) > 0) {
    gap_split(sw, g->right, size, start, &g->right, r);
    *l = t;
  } else {
    gap_split(sw, g->left, size, start, l, &g->left);
    *r = t;
  }
}

static int gap_merge(Sweep *sw, int l, int r) {
  if (l < 0 || r < 0)
    return l < 0 ? r : l;
  if (sw->pool[l].prio > sw->pool[r].prio) {
    sw->pool[l].right = gap_merge(sw, sw->pool[l].right, r);
    return l;
  }
  sw->pool[r].left = gap_merge(sw, l, sw->pool[r].left);
  return r;
}

static void gap_add(Sweep *sw, uint64_t start, uint64_t end, int above) {
  if (end <= start)
    return;
  int t = sw->nfree ? sw->free_list[--sw->nfree] : sw->used++;
  uint32_t h = (uint32_t)t * 0x9E3779B9u; /* deterministic priorities, well mixed */
  h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
  sw->pool[t] = (Gap){end - start, start, h, -1, -1, above};
  int l, r;
  gap_split(sw, sw->root, end - start, start, &l, &r);
  sw->root = gap_merge(sw, gap_merge(sw, l, t), r);
}

static void gap_remove(Sweep *sw, uint64_t start, uint64_t end) {
  if (end <= start)
    return;
  int *link = &sw->root;
  while (*link >= 0) {
    Gap *g = &sw->pool[*link];
    int c = gap_cmp(end - start, start, g);
    if (!c) {
      int t = *link;
      *link = gap_merge(sw, g->left, g->right);
      sw->free_list[sw->nfree++] = t;
      return;
    }
    link = c < 0 ? &g->left : &g->right;
  }
}

/* The smallest gap of at least size bytes, lowest start first; -1: none. */
static int gap_fit(const Sweep *sw, uint64_t size) {
  int best = -1;
  for (int t = sw->root; t >= 0;) {
    const Gap *g = &sw->pool[t];
    if (gap_cmp(size, 0, g) <= 0) {
      best = t;
      t = g->left;
    } else {
      t = g->right;
    }
  }
  return best;
}

static uint64_t end_of(const MemSlot *s) {
  return align_up(s->offset + s->bytes, GPUCC_ARENA_ALIGN);
}

/* Places todo (in by_first order) by the sweep; by_last: the same buffers by last use.
 * Returns the arena's end, or UINT64_MAX on out of memory. */
static uint64_t place_sweep(Place *pl, MemSlot **todo, MemSlot **by_last_use) {
  int n = pl->n;
  Sweep sw = {malloc(sizeof(Gap) * (size_t)(n + 1)), malloc(sizeof(int) * (size_t)(n + 1)),
              0, 0, -1, malloc(sizeof(int) * (size_t)(n + 1)),
              malloc(sizeof(int) * (size_t)(n + 1)), -1};
  uint64_t end = pl->base;
  if (!sw.pool || !sw.free_list || !sw.prev || !sw.next) {
    end = UINT64_MAX;
    goto out;
  }
  int gone = 0;
  for (int i = 0; i < n; i++) {
    MemSlot *s = todo[i];
    /* buffers dead before s's first step leave: the gaps beside them become one */
    for (; gone < n && by_last_use[gone]->last < s->first; gone++) {
      int b = pl->index[by_last_use[gone]->v->id], l = sw.prev[b], r = sw.next[b];
      uint64_t from = l >= 0 ? end_of(pl->slot[l]) : pl->base;
      gap_remove(&sw, from, pl->slot[b]->offset);
      if (r >= 0) {
        gap_remove(&sw, end_of(pl->slot[b]), pl->slot[r]->offset);
        gap_add(&sw, from, pl->slot[r]->offset, r);
        sw.prev[r] = l;
      } else {
        sw.tail = l;
      }
      if (l >= 0)
        sw.next[l] = r;
    }
    int k = pl->index[s->v->id], fit = gap_fit(&sw, s->bytes);
    if (fit >= 0) {
      /* at the gap's start, between the live buffers around it */
      Gap g = sw.pool[fit];
      int l = sw.prev[g.above];
      gap_remove(&sw, g.start, g.start + g.size);
      s->offset = g.start;
      gap_add(&sw, end_of(s), g.start + g.size, g.above);
      sw.prev[k] = l;
      sw.next[k] = g.above;
      sw.prev[g.above] = k;
      if (l >= 0)
        sw.next[l] = k;
    } else {
      s->offset = sw.tail >= 0 ? end_of(pl->slot[sw.tail]) : pl->base;
      sw.prev[k] = sw.tail;
      sw.next[k] = -1;
      if (sw.tail >= 0)
        sw.next[sw.tail] = k;
      sw.tail = k;
    }
    if (s->offset + s->bytes > end)
      end = s->offset + s->bytes;
  }
out:
  free(sw.pool);
  free(sw.free_list);
  free(sw.prev);
  free(sw.next);
  return end;
}

/* The overlaps of the buffers (pl->start, pl->adj), found by a sweep over steps in
 * first-use order; no lists (pl->start NULL) when there are more than PLAN_PAIRS, which
 * would make placing in any order but earliest first cost more than the plan is worth.
 * -1 on out of memory. */
static int list_overlaps(Place *pl, MemSlot **by_first_use) {
  int n = pl->n, nlive = 0, npairs = 0;
  int64_t most = (int64_t)n * (n - 1) / 2 < PLAN_PAIRS ? (int64_t)n * (n - 1) / 2 : PLAN_PAIRS;
  int *live = malloc(sizeof *live * (size_t)(n + 1));
  int *pairs = malloc(sizeof *pairs * 2 * (size_t)(most + 1));
  pl->start = calloc((size_t)n + 2, sizeof *pl->start);
  if (!live || !pairs || !pl->start) {
    free(live);
    free(pairs);
    return -1;
  }
  for (int i = 0; i < n && npairs <= PLAN_PAIRS; i++) {
    const MemSlot *s = by_first_use[i];
    int k = pl->index[s->v->id], keep = 0;
    for (int j = 0; j < nlive; j++) {
      if (pl->slot[live[j]]->last < s->first)
        continue; /* dead before s, so before every buffer after it too */
      live[keep++] = live[j];
      if (npairs == PLAN_PAIRS) {
        npairs++;
        break;
      }
      pairs[2 * npairs] = live[j];
      pairs[2 * npairs++ + 1] = k;
    }
    nlive = keep;
    live[nlive++] = k;
  }
  free(live);
  if (npairs > PLAN_PAIRS) {
    free(pairs);
    free(pl->start);
    pl->start = NULL;
    return 0;
  }
  pl->adj = malloc(sizeof *pl->adj * (2 * (size_t)npairs + 1));
  if (!pl->adj) {
    free(pairs);
    return -1;
  }
  /* counts at start[k + 2], prefix sums, then each overlap placed at start[k + 1]++ */
  for (int e = 0; e < 2 * npairs; e++)
    pl->start[pairs[e] + 2]++;
  for (int k = 2; k <= n + 1; k++)
    pl->start[k] += pl->start[k - 1];
  for (int e = 0; e < npairs; e++) {
    int a = pairs[2 * e], b = pairs[2 * e + 1];
    pl->adj[pl->start[a + 1]++] = b;
    pl->adj[pl->start[b + 1]++] = a;
  }
  free(pairs);
  return 0;
}

/* Intermediates: best fit in four orders (largest first, earliest first, largest area
 * of bytes x steps first, longest-lived first), then in shuffles of the best of them,
 * keeping the smallest arena. Each buffer goes into the best-fitting gap among the
 * buffers already placed whose live range (the steps from its first use to its last)
 * overlaps its own. A step's outputs never share bytes with its inputs (both are live at
 * that step) unless share_in_place made them one buffer. Also computes the lower bound
 * and the no-reuse sum of the arena.
 *
 * Cost: earliest first is a sweep, O(n log n) (place_sweep). The other orders look at
 * each buffer's overlaps, so they are tried only while there are at most PLAN_PAIRS of
 * them, and no more orders are tried once PLAN_WORK overlaps have been looked at: the
 * buffers of a graph that keeps thousands live at once (a split into thousands of parts)
 * are placed earliest first alone. */
static int place_intermediates(MemPlan *mp, int nsteps, uint64_t base, Diag *d) {
  int n = 0;
  Place pl = {.base = base};
  MemSlot **todo = calloc((size_t)mp->nslots + 1, sizeof *todo);
  MemSlot **best = calloc((size_t)mp->nslots + 1, sizeof *best);
  MemSlot **by_last_use = calloc((size_t)mp->nslots + 1, sizeof *by_last_use);
  uint64_t *live = calloc((size_t)nsteps + 2, sizeof *live);
  pl.slot = calloc((size_t)mp->nslots + 1, sizeof *pl.slot);
  pl.rank = calloc((size_t)mp->nslots + 1, sizeof *pl.rank);
  pl.index = calloc((size_t)mp->nslots + 1, sizeof *pl.index);
  pl.conflict = calloc((size_t)mp->nslots + 1, sizeof *pl.conflict);
  int rc = -1;
  if (!todo || !best || !by_last_use || !live || !pl.slot || !pl.rank || !pl.index ||
      !pl.conflict)
    goto out;
  for (int id = 0; id < mp->nslots; id++) {
    MemSlot *s = &mp->slot[id];
    if (s->v && s->root == s->v && s->v->kind == VK_NODE && !s->dedicated && s->first >= 0 &&
        s->bytes) {
      pl.index[id] = n;
      pl.slot[n] = by_last_use[n] = s;
      todo[n++] = s;
    }
  }
  pl.n = n;
  /* the no-reuse sum, and the lower bound: the most bytes live at any step (live[] holds
   * each step's change) */
  uint64_t naive = base, most = 0, now = 0;
  for (int i = 0; i < n; i++) {
    naive = align_up(naive, GPUCC_ARENA_ALIGN) + todo[i]->bytes;
    if (todo[i]->first < nsteps) {
      live[todo[i]->first] += todo[i]->bytes;
      live[(todo[i]->last < nsteps ? todo[i]->last : nsteps - 1) + 1] -= todo[i]->bytes;
    }
  }
  for (int k = 0; k < nsteps; k++) {
    now += live[k];
    most = now > most ? now : most;
  }
  qsort(by_last_use, (size_t)n, sizeof *by_last_use, by_last);
  qsort(todo, (size_t)n, sizeof *todo, by_first);
  if (list_overlaps(&pl, todo))
    goto out;
  /* four orders, then shuffles of the best, until one reaches the bound */
  int (*const orders[])(const void *, const void *) = {by_size, by_first, by_area, by_length};
  uint64_t best_end = UINT64_MAX, rng = 0x9E3779B97F4A7C15u;
  bool best_swept = false;
  for (int o = 0; o < 4 + PLAN_SHUFFLES && best_end > base + most && pl.work <= PLAN_WORK;
       o++) {
    bool swept = o == 1;
    if (!swept && !pl.start)
      continue;
    if (o < 4) {
      qsort(todo, (size_t)n, sizeof *todo, orders[o]);
    } else {
      memcpy(todo, best, sizeof *todo * (size_t)n);
      for (int i = 0; i < n && n > 1; i++) { /* swap about a quarter with others */
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        if (rng % 4 == 0) {
          int j = (int)((rng >> 8) % (uint64_t)n);
          MemSlot *t = todo[i];
          todo[i] = todo[j];
          todo[j] = t;
        }
      }
    }
    uint64_t end = swept ? place_sweep(&pl, todo, by_last_use) : place_in_order(&pl, todo);
    if (end == UINT64_MAX)
      goto out;
    if (end < best_end) {
      best_end = end;
      best_swept = swept;
      memcpy(best, todo, sizeof *todo * (size_t)n);
    }
  }
  memcpy(todo, best, sizeof *todo * (size_t)n);
  uint64_t end = best_swept ? place_sweep(&pl, todo, by_last_use) : place_in_order(&pl, todo);
  if (end == UINT64_MAX)
    goto out;
  mp->arena_bytes = end;
  mp->lower_bound = base + most;
  mp->naive_bytes = naive + mp->in_place_bytes; /* no reuse: in-place outputs too */
  rc = 0;
out:
  free(todo);
  free(best);
  free(by_last_use);
  free(live);
  free(pl.slot);
  free(pl.rank);
  free(pl.index);
  free(pl.conflict);
  free(pl.start);
  free(pl.adj);
  return rc ? diag_error(d, (SrcLoc){0}, "out of memory") : 0;
}

/* In-place kernels: a pointwise kernel's output takes the buffer of an input that the
 * kernel may overwrite (KernelStep.inplace) and that no later step reads, when both are
 * intermediates of one size. The output (and every alias of it) then has the input's
 * root, whose life runs on to the output's last use. Counts them, and the bytes their
 * outputs would take of their own, in mp. -1 on out of memory. */
static int share_in_place(const Program *p, MemPlan *mp) {
  /* each root's slots (itself and its aliases) in a list, so a root that takes another's
   * buffer moves only its own */
  int *head = malloc(sizeof *head * (size_t)(mp->nslots + 1));
  int *next = malloc(sizeof *next * (size_t)(mp->nslots + 1));
  if (!head || !next) {
    free(head);
    free(next);
    return -1;
  }
  for (int id = 0; id < mp->nslots; id++)
    head[id] = next[id] = -1;
  for (int id = 0; id < mp->nslots; id++)
    if (mp->slot[id].v) {
      int r = mp->slot[id].root->id;
      next[id] = head[r];
      head[r] = id;
    }
  int variants_end = 0; /* the steps of a choice's variants run before it: never in place */
  for (int i = 0; i < p->nsteps; i++) {
    const Step *s = &p->steps[i];
    if (s->kind == STEP_CHOICE) {
      variants_end = i + 1;
      for (int v = 0; v < s->choice.nvariants; v++)
        variants_end += s->choice.count[v];
    }
    if (s->kind != STEP_KERNEL || !s->kernel.inplace || s->kernel.nargs != s->kernel.nread + 1 ||
        i < variants_end)
      continue;
    MemSlot *o = slot_of(mp, s->kernel.args[s->kernel.nread]);
    if (o->root != o->v || o->dedicated || !o->bytes)
      continue;
    for (int k = 0; k < s->kernel.nread && k < 64; k++) {
      if (!(s->kernel.inplace >> k & 1))
        continue;
      MemSlot *r = slot_of(mp, slot_of(mp, s->kernel.args[k])->root);
      if (r->v->kind != VK_NODE || r->dedicated || r->last != i || r->bytes != o->bytes ||
          r == o)
        continue;
      int was = o->v->id, to = r->v->id, last = -1;
      for (int id = head[was]; id >= 0; id = next[id]) {
        mp->slot[id].root = r->v;
        last = id;
      }
      if (last >= 0) {
        next[last] = head[to];
        head[to] = head[was];
        head[was] = -1;
      }
      r->last = o->last;
      mp->in_place_bytes += align_up(o->bytes, GPUCC_ARENA_ALIGN);
      mp->in_place++;
      break;
    }
  }
  free(head);
  free(next);
  return 0;
}

/* The most bytes the values of a graph may need together (memplan_build): past any
 * GPU's memory, and far from where the plan's sums of offsets and sizes wrap. */
enum { PLAN_MAX_BYTES_LOG2 = 56 };
#define PLAN_MAX_BYTES ((uint64_t)1 << PLAN_MAX_BYTES_LOG2)

/* A dedicated slot at the end of what is placed so far. */
static uint64_t take(uint64_t *end, uint64_t bytes) {
  uint64_t at = align_up(*end, GPUCC_ARENA_ALIGN);
  *end = at + bytes;
  return at;
}

static int check_outputs(const Graph *g, Diag *d) {
  bool *seen = calloc((size_t)g->next_value_id + 1, sizeof *seen);
  if (!seen)
    return diag_error(d, (SrcLoc){0}, "out of memory");
  int rc = 0;
  for (int j = 0; j < g->noutputs && !rc; j++) {
    if (seen[g->outputs[j]->id])
      rc = diag_error(d, g->loc,
                      "graph '%s' returns %%%s twice; a compiled model needs one name per "
                      "output",
                      g->name, g->outputs[j]->name);
    seen[g->outputs[j]->id] = true;
  }
  free(seen);
  return rc;
}

int memplan_build(const Graph *g, const Program *p, MemPlan *mp, Diag *d) {
  memset(mp, 0, sizeof *mp);
  if (check_outputs(g, d))
    return -1;
  mp->nslots = g->next_value_id;
  mp->slot = calloc((size_t)mp->nslots + 1, sizeof *mp->slot);
  mp->weights_used = calloc((size_t)mp->nslots + 1, sizeof *mp->weights_used);
  mp->output_offset = calloc((size_t)g->noutputs + 1, sizeof *mp->output_offset);
  mp->output_copy = calloc((size_t)g->noutputs + 1, sizeof *mp->output_copy);
  if (!mp->slot || !mp->weights_used || !mp->output_offset || !mp->output_copy) {
    memplan_free(mp);
    return diag_error(d, (SrcLoc){0}, "out of memory");
  }
  for (int id = 0; id < mp->nslots; id++)
    mp->slot[id].first = mp->slot[id].last = -1;
  int rc = 0;
  for (int i = 0; i < g->ninputs && !rc; i++)
    rc = note_use(mp, g->inputs[i], -1, d);
  if (!rc)
    rc = note_steps(p, mp, d);
  for (int j = 0; j < g->noutputs && !rc; j++)
    rc = note_use(mp, g->outputs[j], -1, d);
  if (rc) {
    memplan_free(mp);
    return -1;
  }
  /* Each value has at most IR_MAX_BYTES (2^48), but a graph of many may need more than
   * 64 bits can count: every offset the plan computes is at most the sum of the values'
   * bytes, aligned, so that sum is checked first. */
  uint64_t total = 0;
  for (int id = 0; id < mp->nslots; id++)
    if (mp->slot[id].v) {
      mp->slot[id].bytes = value_bytes(mp->slot[id].v);
      total += align_up(mp->slot[id].bytes, GPUCC_ARENA_ALIGN);
      if (total > PLAN_MAX_BYTES) {
        memplan_free(mp);
        return diag_error(d, g->loc, "graph '%s': its values need more than 2^%d bytes of "
                          "memory together", g->name ? g->name : "", PLAN_MAX_BYTES_LOG2);
      }
    }

  /* The arena starts with the dedicated slots: inputs, outputs copied from a constant or
   * an input, then the buffers of the other outputs. */
  uint64_t end = 0;
  for (int i = 0; i < g->ninputs; i++) {
    MemSlot *s = slot_of(mp, g->inputs[i]);
    s->dedicated = true;
    s->offset = take(&end, s->bytes);
  }
  for (int j = 0; j < g->noutputs; j++) {
    const Value *r = slot_of(mp, g->outputs[j])->root;
    if (r->kind == VK_NODE)
      continue;
    mp->output_copy[j] = true;
    mp->output_offset[j] = take(&end, value_bytes(g->outputs[j]));
    if (r->kind == VK_CONST)
      mp->weights_used[r->id] = true;
  }
  for (int j = 0; j < g->noutputs; j++) {
    MemSlot *r = slot_of(mp, slot_of(mp, g->outputs[j])->root);
    if (mp->output_copy[j] || r->dedicated)
      continue;
    r->dedicated = true;
    r->offset = take(&end, r->bytes);
  }
  if (share_in_place(p, mp)) {
    memplan_free(mp);
    return diag_error(d, (SrcLoc){0}, "out of memory");
  }
  if (place_intermediates(mp, p->nsteps, align_up(end, GPUCC_ARENA_ALIGN), d)) {
    memplan_free(mp);
    return -1;
  }
  if (mp->arena_bytes < end)
    mp->arena_bytes = end;
  if (mp->lower_bound < end)
    mp->lower_bound = end;
  if (mp->naive_bytes < end)
    mp->naive_bytes = end;

  /* Constants, in the weights blob in id order; then every alias takes its root's place. */
  uint64_t wend = 0;
  for (int id = 0; id < mp->nslots; id++) {
    MemSlot *s = &mp->slot[id];
    if (!s->v || s->v->kind != VK_CONST || s->root != s->v)
      continue;
    s->region = GPUCC_REGION_WEIGHTS;
    if (mp->weights_used[id]) {
      s->offset = align_up(wend, WEIGHTS_ALIGN);
      wend = s->offset + s->bytes;
    }
  }
  mp->weights_bytes = wend;
  for (int id = 0; id < mp->nslots; id++) {
    MemSlot *s = &mp->slot[id];
    if (!s->v || s->root == s->v)
      continue;
    const MemSlot *r = slot_of(mp, s->root);
    s->region = r->region;
    s->offset = r->offset;
    s->dedicated = r->dedicated;
  }
  for (int j = 0; j < g->noutputs; j++)
    if (!mp->output_copy[j])
      mp->output_offset[j] = slot_of(mp, g->outputs[j])->offset;
  return 0;
}

int memplan_weights(const Graph *g, const MemPlan *mp, void **out, Diag *d) {
  (void)g;
  *out = NULL;
  if (!mp->weights_bytes)
    return 0;
  unsigned char *w = calloc(1, (size_t)mp->weights_bytes);
  if (!w)
    return diag_error(d, (SrcLoc){0}, "out of memory for %llu bytes of weights",
                      (unsigned long long)mp->weights_bytes);
  for (int id = 0; id < mp->nslots; id++) {
    const MemSlot *s = &mp->slot[id];
    if (mp->weights_used[id] && s->v && s->v->data && s->bytes)
      memcpy(w + s->offset, s->v->data->data, (size_t)s->bytes);
  }
  *out = w;
  return 0;
}

void memplan_free(MemPlan *mp) {
  free(mp->slot);
  free(mp->weights_used);
  free(mp->output_offset);
  free(mp->output_copy);
  memset(mp, 0, sizeof *mp);
}

/* " 5 matmul, 6 add" for nodes[0..n), after `what` (nothing when n is 0). */
static void print_nodes(FILE *f, const char *what, const Node *const *nodes, int n) {
  if (!n)
    return;
  fprintf(f, "; %s", what);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s %d %s", i ? "," : "", nodes[i]->id, op_info[nodes[i]->op].name);
}

static void print_values(FILE *f, const Value *const *v, int n) {
  for (int i = 0; i < n; i++) {
    fputs(i ? ", " : " ", f);
    ir_print_value_name(f, v[i]->name);
  }
}

/* An attention operand: its buffer, and the nodes between it and the matmul. */
static void print_operand(FILE *f, const char *what, const GroupOperand *o) {
  fprintf(f, "; %s ", what);
  ir_print_value_name(f, o->view.base->name);
  for (int i = 0; i < o->n; i++)
    fprintf(f, "%s %d %s", i ? "," : " through", o->node[i]->id, op_info[o->node[i]->op].name);
}

/* The plan of each fuse group, by the recognizer: its kind, its nodes by role (ir.h's
 * GroupPlan), what it writes, what it reads. */
static void print_groups(const Graph *g, FILE *f) {
  int n = g->nnodes;
  int *first = malloc(sizeof *first * (size_t)(n + 1)), *next = malloc(sizeof *next * (size_t)(n + 1));
  const Node **members = malloc(sizeof *members * (size_t)(n + 1));
  Users u = {0};
  if (!first || !next || !members || ir_fuse_groups(g, first, next) || users_build(g, &u)) {
    free(first), free(next), free(members), users_free(&u);
    return;
  }
  bool any = false;
  for (int i = 0; i < n; i++) {
    if (first[i] < 0 || next[i] >= 0)
      continue;
    int m = 0;
    for (int j = first[i]; j >= 0; j = next[j])
      members[m++] = g->nodes[j];
    GroupPlan p;
    char why[512];
    if (!any)
      fputs("fuse groups:\n", f);
    any = true;
    fprintf(f, "  %lld ", (long long)node_fuse_group(g->nodes[i]));
    if (group_plan(g, &u, members, m, node_group_kind(g->nodes[i]), NULL, &p, why, sizeof why)) {
      fprintf(f, "no plan: %s\n", why);
      group_plan_free(&p);
      continue;
    }
    fputs(group_kind_name(p.kind), f);
    if (p.kind == GROUP_ATTENTION) {
      print_operand(f, "queries", &p.q);
      print_operand(f, "keys", &p.k);
      print_operand(f, "values", &p.v);
      print_nodes(f, "scores", &p.scores, 1);
      print_nodes(f, "before the softmax", p.pre, p.npre);
      print_nodes(f, "softmax", &p.softmax, 1);
      print_nodes(f, "after it", p.post, p.npost);
      print_nodes(f, "output", &p.values, 1);
      if (p.root != p.values)
        print_nodes(f, "transposed", &p.root, 1);
    } else {
      print_nodes(f, "prologue", p.prologue, p.nprologue);
      print_nodes(f, "views", p.view, p.nview);
      print_nodes(f, "anchor", &p.anchor, p.anchor ? 1 : 0);
      print_nodes(f, p.anchor ? "epilogue" : "nodes", p.epilogue, p.nepilogue);
    }
    if (p.bias) {
      fputs("; bias", f);
      print_values(f, &p.bias, 1);
    }
    if (p.residual) {
      fputs("; residual", f);
      print_values(f, &p.residual, 1);
    }
    if (p.relu || p.gelu)
      fprintf(f, ", then %s", p.relu ? "relu" : "gelu");
    fputs("; writes", f);
    print_values(f, &p.out, 1);
    if (p.side) {
      fputc(',', f);
      print_values(f, &p.side, 1);
    }
    fputs("; reads", f);
    print_values(f, p.in, p.nin);
    fputc('\n', f);
    group_plan_free(&p);
  }
  free(first), free(next), free(members), users_free(&u);
}

static int by_place(const void *pa, const void *pb) {
  const MemSlot *a = *(const MemSlot *const *)pa, *b = *(const MemSlot *const *)pb;
  if (a->offset != b->offset)
    return a->offset < b->offset ? -1 : 1;
  return a->v->id - b->v->id;
}

/* ---------------------------------------------------------------- variants
 *
 * What the choices' variants cost: each choice's variants, and in all the bytes of CUDA C
 * and of the cubin that the variants beyond each default take (codegen counts the
 * source's bytes; the cubin's are its ELF sections named after their kernels: code,
 * constants, attributes), and NVRTC's time for the module, measured. */

/* Whether step i is in a variant of a choice other than its first: *in the step after. */
static bool extra_variant(const Program *p, int i, int *from, int *to) {
  const Step *s = &p->steps[i];
  if (s->kind == STEP_CHOICE) {
    *from = *to = i + 1 + s->choice.count[0];
    for (int v = 1; v < s->choice.nvariants; v++)
      *to += s->choice.count[v];
  }
  return i >= *from && i < *to;
}

/* One line per choice: its label, its variants and what they are. */
static void print_choices(const Program *p, FILE *f, const char *indent) {
  for (int i = 0; i < p->nsteps; i++) {
    const Step *s = &p->steps[i];
    if (s->kind != STEP_CHOICE)
      continue;
    int kernels = 0, gemms = 0, at = i + 1;
    for (int v = 0; v < s->choice.nvariants; v++)
      for (int j = 0; j < s->choice.count[v]; j++, at++) {
        kernels += p->steps[at].kind == STEP_KERNEL;
        gemms += p->steps[at].kind == STEP_GEMM;
      }
    fprintf(f, "%sstep %d: %d variants (%d kernel%s, %d cuBLASLt GEMM%s): %s\n",
            indent, i, s->choice.nvariants, kernels, kernels == 1 ? "" : "s", gemms,
            gemms == 1 ? "" : "s", s->choice.label);
  }
}

/* w little-endian bytes of b[off..] (0 past its n bytes). */
static uint64_t rd_le(const unsigned char *b, size_t n, uint64_t off, int w) {
  uint64_t v = 0;
  if (off > n || (uint64_t)w > n - off)
    return 0;
  for (int i = w - 1; i >= 0; i--)
    v = v << 8 | b[off + (uint64_t)i];
  return v;
}

/* The bytes of the cubin's sections named after a kernel (".text.NAME",
 * ".nv.info.NAME", ...; not the shared memory's, which take no bytes of the file) into
 * *all, and those of the kernels in extra[] into *extra. 0, or -1 when the cubin is no
 * ELF this reads. */
static int cubin_kernel_bytes(const NvrtcOutput *bin, const char *const *names, int nnames,
                              const bool *extra, uint64_t *all, uint64_t *xbytes) {
  const unsigned char *b = bin->cubin;
  size_t n = bin->cubin_size;
  *all = *xbytes = 0;
#define RD(off, w) rd_le(b, n, (off), (w))
  if (n < 64 || memcmp(b, "\x7f" "ELF", 4) || b[4] != 2 || b[5] != 1)
    return -1;
  uint64_t shoff = RD(0x28, 8), shent = RD(0x3a, 2), shnum = RD(0x3c, 2), shstr = RD(0x3e, 2);
  if (shent < 64 || shstr >= shnum || shoff > n || shnum > (n - shoff) / shent)
    return -1;
  uint64_t stroff = RD(shoff + shstr * shent + 24, 8), strsize = RD(shoff + shstr * shent + 32, 8);
  if (stroff > n || strsize > n - stroff)
    return -1;
  for (uint64_t k = 0; k < shnum; k++) {
    uint64_t h = shoff + k * shent, name = RD(h, 4), type = RD(h + 4, 4), size = RD(h + 32, 8);
    if (name >= strsize || type == 8 /* SHT_NOBITS */)
      continue;
    const char *sn = (const char *)b + stroff + name, *dot = NULL;
    size_t len = strnlen(sn, strsize - name);
    for (size_t c = 0; c < len; c++)
      dot = sn[c] == '.' ? sn + c : dot;
    if (!dot || len == strsize - name)
      continue;
    for (int j = 0; j < nnames; j++)
      if (!strcmp(dot + 1, names[j])) {
        *all += size;
        *xbytes += extra[j] ? size : 0;
        break;
      }
  }
#undef RD
  return 0;
}

/* -v: the choices, then what their variants beyond the defaults cost. bins NULL: no
 * module was compiled (or from_cache: it came from NVRTC's cache, ms not NVRTC's); else
 * the nbins modules of the program's units. */
static void report_variants(const Program *p, const NvrtcOutput *bins, int nbins, double ms,
                            FILE *f) {
  int choices = 0, variants = 0, nnames = 0, from = 0, to = 0;
  size_t src_extra = 0;
  const char **names = calloc((size_t)p->nsteps + 1, sizeof *names);
  bool *extra = calloc((size_t)p->nsteps + 1, sizeof *extra);
  for (int i = 0; i < p->nsteps; i++) {
    const Step *s = &p->steps[i];
    bool x = extra_variant(p, i, &from, &to);
    if (s->kind == STEP_CHOICE) {
      choices++;
      variants += s->choice.nvariants;
      for (int v = 1; v < s->choice.nvariants; v++)
        src_extra += s->choice.source_bytes[v];
    }
    if (s->kind == STEP_KERNEL && names && extra) {
      /* a kernel counts as the variants' when only their steps launch it (codegen
       * launches a kernel again for a group of the same code) */
      int j = 0;
      while (j < nnames && strcmp(names[j], s->kernel.name))
        j++;
      if (j == nnames) {
        names[nnames++] = s->kernel.name;
        extra[j] = x;
      }
      extra[j] = extra[j] && x;
    }
  }
  if (!choices) {
    fprintf(f, "gpucc: variants: none (every group has one kernel or GEMM)\n");
  } else {
    print_choices(p, f, "gpucc: variants: choice at ");
    fprintf(f, "gpucc: variants: %d choice%s carry %d variants, %d beyond their defaults: %zu of "
               "the CUDA C's %zu bytes (%.1f%%)", choices, choices == 1 ? "" : "s", variants, variants - choices,
            src_extra, p->source_len, p->source_len ? 100.0 * (double)src_extra / (double)p->source_len : 0.0);
    uint64_t all = 0, xb = 0;
    size_t cubin = 0;
    bool read = bins && names && extra, cached = true;
    for (int u = 0; u < nbins && read; u++) {
      uint64_t a, x;
      read = !cubin_kernel_bytes(&bins[u], names, nnames, extra, &a, &x);
      all += a;
      xb += x;
      cubin += bins[u].cubin_size;
      cached = cached && bins[u].from_cache;
    }
    if (read) {
      double share = all ? (double)xb / (double)all : 0;
      fprintf(f, ", %" PRIu64 " of the cubin's %zu bytes (%.1f%% of its kernels' %" PRIu64 ")",
              xb, cubin, 100 * share, all);
      if (cached)
        fprintf(f, "; the module from NVRTC's cache");
      else
        fprintf(f, "; NVRTC took %.0f ms, about %.0f ms of it theirs (in proportion to the "
                   "kernels' bytes)", ms, ms * share);
    }
    fputc('\n', f);
  }
  free(names);
  free(extra);
}

void memplan_print(const Graph *g, const Program *p, const MemPlan *mp, FILE *f) {
  fprintf(f, "memory plan of %s: %d steps\n", g->name, p->nsteps);
  const MemSlot **order = calloc((size_t)mp->nslots + 1, sizeof *order);
  int n = 0, nweights = 0;
  for (int id = 0; order && id < mp->nslots; id++) {
    const MemSlot *s = &mp->slot[id];
    if (s->v && s->region == GPUCC_REGION_ARENA && s->bytes)
      order[n++] = s;
    nweights += s->v && s->region == GPUCC_REGION_WEIGHTS && mp->weights_used[id];
  }
  qsort(order, (size_t)n, sizeof *order, by_place);
  for (int i = 0; i < n; i++) {
    const MemSlot *s = order[i];
    char ts[256];
    fputs("  ", f);
    ir_print_value_name(f, s->v->name);
    fprintf(f, ": %s  at %" PRIu64 ", %" PRIu64 " bytes", type_str(&s->v->type, ts, sizeof ts),
            s->offset, s->bytes);
    if (s->root != s->v) {
      fputs(", the bytes of ", f);
      ir_print_value_name(f, s->root->name);
    } else if (s->dedicated) {
      fputs(", a graph input or output: its own slot", f);
    } else {
      fprintf(f, ", live over steps %d..%d", s->first, s->last);
    }
    fputc('\n', f);
  }
  free(order);
  fprintf(f, "weights: %" PRIu64 " bytes in %d constant%s\n", mp->weights_bytes, nweights,
          nweights == 1 ? "" : "s");
  double over = mp->lower_bound ? 100.0 * ((double)mp->arena_bytes / (double)mp->lower_bound - 1) : 0;
  fprintf(f, "arena: %" PRIu64 " bytes; lower bound %" PRIu64 " (+%.1f%%); with no reuse %" PRIu64
             "; %d kernel%s in place\n", mp->arena_bytes, mp->lower_bound, over,
          mp->naive_bytes, mp->in_place, mp->in_place == 1 ? "" : "s");
  print_groups(g, f);
  print_choices(p, f, "choice at ");
}

/* ---------------------------------------------------------------- the plan */

GpuccDType rt_dtype(DType t) {
  for (int k = GPUCC_DT_INVALID + 1; k < GPUCC_DT_COUNT; k++)
    if (!strcmp(gpucc_dtype_name((GpuccDType)k), dtype_name(t)))
      return (GpuccDType)k;
  return GPUCC_DT_INVALID;
}

DType ir_dtype(GpuccDType t) {
  DType d = DT_UNKNOWN;
  dtype_from_name(gpucc_dtype_name(t), &d);
  return d;
}

static GpuccPtr place_of(const MemPlan *mp, const Value *v, int64_t elem_offset) {
  const MemSlot *s = &mp->slot[v->id];
  GpuccPtr p = {s->region, s->offset + (uint64_t)elem_offset * dtype_size(v->type.dtype)};
  return p;
}

/* A runtime failure while building the plan is gpucc's bug, not the user's input. */
static int plan_error(Diag *d, const char *what) {
  return diag_error(d, (SrcLoc){0}, "internal error: %s: %s", what, gpucc_last_error());
}

static int add_tensor(GpuccPlan *plan, bool input, const Value *v, uint64_t offset, Diag *d) {
  int64_t dims[GPUCC_MAX_RANK];
  for (int i = 0; i < v->type.shape.rank; i++)
    dims[i] = v->type.shape.dims[i].n;
  GpuccDType t = rt_dtype(v->type.dtype);
  GpuccStatus st = input ? gpucc_plan_add_input(plan, v->name, t, v->type.shape.rank, dims, offset)
                         : gpucc_plan_add_output(plan, v->name, t, v->type.shape.rank, dims, offset);
  return st ? plan_error(d, input ? "plan input" : "plan output") : 0;
}

static int add_kernel(GpuccPlan *plan, const MemPlan *mp, const KernelStep *k, Diag *d) {
  GpuccArg *args = calloc((size_t)k->nargs + 1, sizeof *args);
  if (!args)
    return diag_error(d, (SrcLoc){0}, "out of memory");
  for (int a = 0; a < k->nargs; a++)
    args[a] = gpucc_ptr_arg(place_of(mp, k->args[a], 0));
  uint32_t grid[3], block[3];
  for (int i = 0; i < 3; i++) {
    grid[i] = k->grid[i];
    block[i] = k->block[i];
  }
  GpuccStatus st = gpucc_plan_add_kernel(plan, k->name, grid, block, k->shared_bytes, args, k->nargs);
  free(args);
  return st ? plan_error(d, "plan kernel step") : 0;
}

/* codegen's GEMM in cuBLASLt's terms already; C is D (beta 0) unless a residual is
 * added; TF32 only where the matmul asked for it. */
static int add_gemm(GpuccPlan *plan, const MemPlan *mp, const GemmStep *s, Diag *d) {
  GpuccDType t = rt_dtype(s->dtype);
  GpuccGemm g = {
      .a = place_of(mp, s->a, s->offset_a), .b = place_of(mp, s->b, s->offset_b),
      .d = place_of(mp, s->d, s->offset_d),
      .a_type = t, .b_type = t, .cd_type = rt_dtype(s->dtype_d),
      .compute = s->compute == DT_F64 ? GPUCC_COMPUTE_64F
                 : s->tf32            ? GPUCC_COMPUTE_32F_FAST_TF32
                                      : GPUCC_COMPUTE_32F,
      .trans_a = s->trans_a, .trans_b = s->trans_b,
      .m = s->m, .n = s->n, .k = s->k, .lda = s->lda, .ldb = s->ldb, .ldc = s->ldc, .ldd = s->ldc,
      .batch = s->batch, .stride_a = s->stride_a, .stride_b = s->stride_b,
      .stride_c = s->stride_d, .stride_d = s->stride_d,
      .alpha = s->alpha, .beta = s->beta};
  g.c = s->c ? place_of(mp, s->c, s->offset_d) : g.d;
  if (s->bias) {
    g.epilogue = s->gelu   ? GPUCC_EPILOGUE_GELU_BIAS
                 : s->relu ? GPUCC_EPILOGUE_RELU_BIAS
                           : GPUCC_EPILOGUE_BIAS;
    g.bias = place_of(mp, s->bias, 0);
  }
  return gpucc_plan_add_gemm(plan, &g) ? plan_error(d, "plan GEMM step") : 0;
}

_Static_assert(CODEGEN_MAX_VARIANTS == GPUCC_MAX_VARIANTS, "codegen's variants are the plan's");

static int add_choice(GpuccPlan *plan, const ChoiceStep *c, Diag *d) {
  uint32_t count[GPUCC_MAX_VARIANTS];
  for (int v = 0; v < c->nvariants; v++)
    count[v] = (uint32_t)c->count[v];
  return gpucc_plan_add_choice(plan, c->label, c->nvariants, count)
             ? plan_error(d, "plan choice step") : 0;
}

int plan_add_program(GpuccPlan *plan, const Graph *g, const Program *p, const MemPlan *mp,
                     int *nkernels, Diag *d) {
  /* Launches per inference: one variant of a choice runs, variant 0 counted. */
  int first_end = 0, others_end = 0; /* where a choice's variant 0, and its others, end */
  for (int i = 0; i < p->nsteps; i++) {
    const Step *s = &p->steps[i];
    int rc = 0;
    if (s->kind == STEP_KERNEL)
      rc = add_kernel(plan, mp, &s->kernel, d);
    else if (s->kind == STEP_GEMM)
      rc = add_gemm(plan, mp, &s->gemm, d);
    else if (s->kind == STEP_CHOICE)
      rc = add_choice(plan, &s->choice, d);
    if (rc)
      return -1;
    if (s->kind == STEP_CHOICE) {
      first_end = others_end = i + 1 + s->choice.count[0];
      for (int v = 1; v < s->choice.nvariants; v++)
        others_end += s->choice.count[v];
    }
    *nkernels += (s->kind == STEP_KERNEL || s->kind == STEP_GEMM) &&
                 (i < first_end || i >= others_end);
  }
  for (int j = 0; j < g->noutputs; j++) {
    const Value *v = g->outputs[j];
    uint64_t bytes = value_bytes(v);
    if (mp->output_copy[j] && bytes &&
        gpucc_plan_add_copy(plan, gpucc_arena_ptr(mp->output_offset[j]), place_of(mp, v, 0), bytes))
      return plan_error(d, "plan copy step");
  }
  return 0;
}

static int fill_plan(GpuccPlan *plan, const Graph *g, const Program *p, const MemPlan *mp,
                     const NvrtcOutput *units, int nunits, GpuccBuild *out, Diag *d) {
  for (int u = 0; u < nunits; u++)
    if (units[u].cubin_size &&
        gpucc_plan_add_module(plan, units[u].cubin, units[u].cubin_size, units[u].ptx))
      return plan_error(d, "plan module");
  for (int i = 0; i < g->ninputs; i++)
    if (add_tensor(plan, true, g->inputs[i], mp->slot[g->inputs[i]->id].offset, d))
      return -1;
  for (int j = 0; j < g->noutputs; j++)
    if (add_tensor(plan, false, g->outputs[j], mp->output_offset[j], d))
      return -1;
  if (plan_add_program(plan, g, p, mp, &out->nkernels, d))
    return -1;
  out->nsteps = plan->nsteps;
  GpuccStatus st = gpucc_plan_serialize(plan, &out->plan, &out->plan_len);
  return st ? plan_error(d, "the plan does not validate") : 0;
}

/* ---------------------------------------------------------------- the pipeline */

static bool has_kernels(const Program *p) {
  for (int i = 0; i < p->nsteps; i++)
    if (p->steps[i].kind == STEP_KERNEL)
      return true;
  return false;
}

static bool has_gemms(const Program *p) {
  for (int i = 0; i < p->nsteps; i++)
    if (p->steps[i].kind == STEP_GEMM)
      return true;
  return false;
}

/* What the plan format or cuBLASLt cannot take comes from the model, not from a bug of
 * gpucc: said as such, naming the value or node, before anything is compiled (rather
 * than as a plan that does not validate). */
static int check_limits(const Graph *g, const Program *p, Diag *d) {
  for (int k = 0; k < 2; k++) {
    Value *const *vs = k ? g->outputs : g->inputs;
    for (int i = 0; i < (k ? g->noutputs : g->ninputs); i++) {
      size_t n = strlen(vs[i]->name);
      /* An ONNX value has no position; the node that makes it names the model. */
      SrcLoc loc = !vs[i]->loc.file && vs[i]->def ? vs[i]->def->loc : vs[i]->loc;
      if (n > GPUCC_MAX_NAME)
        return diag_error(d, loc, "%s '%.32s...' has a name of %zu bytes; a model's "
                          "inputs and outputs have names of at most %d bytes",
                          k ? "output" : "input", vs[i]->name, n, GPUCC_MAX_NAME);
    }
  }
  for (int i = 0; i < p->nsteps; i++) {
    const GemmStep *s = &p->steps[i].gemm;
    if (p->steps[i].kind != STEP_GEMM ||
        (s->m <= INT32_MAX && s->n <= INT32_MAX && s->k <= INT32_MAX && s->batch <= INT32_MAX))
      continue;
    const Node *n = p->steps[i].node;
    diag_error(d, n ? n->loc : (SrcLoc){0}, "%s: its GEMM has m = %" PRId64 ", n = %" PRId64
               ", k = %" PRId64 " and batch %" PRId64 "; cuBLASLt takes at most 2^31 - 1 in "
               "each", n ? op_info[n->op].name : "matmul", s->m, s->n, s->k, s->batch);
    if (n)
      ir_note_node(d, n);
    return -1;
  }
  return 0;
}

typedef struct StringAt {
  const char *s;
  int at;
} StringAt;

static int by_string_then_place(const void *a, const void *b) {
  const StringAt *x = a, *y = b;
  int c = strcmp(x->s, y->s);
  return c ? c : (x->at > y->at) - (x->at < y->at);
}

int strings_first(const char *const *s, int n, int *first) {
  StringAt *sorted = malloc(((size_t)n + 1) * sizeof *sorted);
  if (!sorted)
    return -1;
  for (int i = 0; i < n; i++)
    sorted[i] = (StringAt){s[i], i};
  qsort(sorted, (size_t)n, sizeof *sorted, by_string_then_place);
  for (int k = 0, head = 0; k < n; k++) {
    if (k > 0 && strcmp(sorted[k - 1].s, sorted[k].s) != 0)
      head = k;
    first[sorted[k].at] = sorted[head].at;
  }
  free(sorted);
  return 0;
}

int dim_value_parse(const char *v, int64_t *size, DimRange *r, char *why, size_t n) {
  if (strstr(v, "..") || strchr(v, ','))
    return range_parse(v, r, why, n) ? -1 : 1;
  char *end;
  errno = 0;
  long long s = strtoll(v, &end, 10);
  if (!*v || *end || errno || s < 0) {
    snprintf(why, n, "the size must be a non-negative integer, or sizes and ranges like "
                     "1,8,32..64");
    return -1;
  }
  *size = s;
  return 0;
}

int pipeline_bind_dims(Graph *g, const GpuccCompileOptions *opt, Diag *d) {
  for (int i = 0; i < opt->nranges; i++) {
    char buf[256];
    const DimRange *r = &opt->ranges[i];
    if (!graph_has_symbol(g, r->sym))
      return diag_error(d, g->loc, "--dim %s=%s: no input of the graph has a dim named '%s'",
                        r->sym, range_str(r, buf, sizeof buf), r->sym);
    if (range_check(r, buf, sizeof buf))
      return diag_error(d, g->loc, "--dim %s: %s", r->sym, buf);
    graph_set_range(g, r);
  }
  return opt->ndims ? codegen_bind_dims(g, opt->dim_names, opt->dim_sizes, opt->ndims, d) : 0;
}

/* opt's pass list (the default pipeline, less the fusion passes with no_fuse), run with
 * its hooks. The calibration inputs are read during the call only. */
static int run_passes(Graph *g, const GpuccCompileOptions *opt, const Target *t, Diag *d) {
  const Pass *passes[MAX_PASSES];
  int n = 0;
  PassContext ctx = {.diag = d, .target = t, .calib_names = opt->calib_names,
                     .calib_inputs = opt->calib_inputs, .ncalib = opt->ncalib,
                     .print_after_all = opt->print_after_all, .dump_dir = opt->dump_dir,
                     .report = opt->report};
  if (opt->precision && precision_parse(opt->precision, &ctx.precision, d))
    return -1;
  if (!opt->passes) {
    for (int i = 0; pass_default_pipeline[i] && n < MAX_PASSES; i++)
      if (!(opt->no_fuse && pass_default_pipeline[i]->fusion))
        passes[n++] = pass_default_pipeline[i];
  } else if (*opt->passes && (n = pass_parse_list(opt->passes, passes, MAX_PASSES, d)) < 0) {
    return -1;
  }
  if (precision_check_passes(ctx.precision, passes, n, d))
    return -1;
  return pass_run_pipeline(g, passes, n, &ctx);
}

/* The plan stage: the runtime's plan of the program (its bytes), and the weights blob. */
/* ---------------------------------------------------------------- translation units */

int nvrtc_compile_split(const char *src, const size_t *cuts, int ncuts, size_t unit_bytes,
                        const char *name, const NvrtcOptions *nopt, NvrtcOutput **outs,
                        int *nouts, Diag *d) {
  size_t pre = codegen_preamble_size(), start = 0;
  char **units = calloc((size_t)ncuts + 1, sizeof *units);
  int n = 0, rc = units ? 0 : -1;
  *outs = NULL;
  *nouts = 0;
  /* as many units as unit_bytes fit in the source, of even sizes: no small last unit
   * that costs NVRTC's overhead for little */
  size_t total = ncuts ? cuts[ncuts - 1] : 0, want = total / unit_bytes ? total / unit_bytes : 1;
  size_t target = total / want;
  for (int c = 0; c < ncuts && !rc; c++) {
    if ((cuts[c] - start < target && c + 1 < ncuts) || (start && cuts[c] == start))
      continue;
    size_t head = start ? pre : 0, body = cuts[c] - start;
    if (!(units[n] = malloc(head + body + 1))) {
      rc = -1;
      break;
    }
    memcpy(units[n], src, head);
    memcpy(units[n] + head, src + start, body);
    units[n++][head + body] = 0;
    start = cuts[c];
  }
  if (rc)
    diag_error(d, (SrcLoc){0}, "out of memory");
  else if (!(*outs = calloc((size_t)n + 1, sizeof **outs)))
    rc = diag_error(d, (SrcLoc){0}, "out of memory");
  else if (!(rc = nvrtc_compile_units((const char *const *)units, n, name, nopt, *outs, d)))
    *nouts = n;
  if (rc) {
    free(*outs);
    *outs = NULL;
  }
  for (int i = 0; i < n; i++)
    free(units[i]);
  free(units);
  return rc ? -1 : 0;
}

static int make_plan(const Graph *g, Compiled *c, Diag *d) {
  const MemPlan *mp = &c->memplan;
  GpuccBuild *out = &c->build;
  GpuccPlan *plan = gpucc_plan_new(mp->arena_bytes, mp->weights_bytes,
                                   has_gemms(c->program) ? GPUCC_GEMM_WORKSPACE : 0);
  int rc = plan ? 0 : diag_error(d, (SrcLoc){0}, "out of memory");
  if (!rc)
    rc = fill_plan(plan, g, c->program, mp, c->units, c->nunits, out, d);
  if (!rc)
    rc = memplan_weights(g, mp, &out->weights, d);
  out->weights_len = (size_t)mp->weights_bytes;
  out->arena_bytes = mp->arena_bytes;
  out->arena_lower_bound = mp->lower_bound;
  out->arena_naive_bytes = mp->naive_bytes;
  out->in_place = mp->in_place;
  gpucc_plan_free(plan);
  return rc;
}

int pipeline_run(Graph *g, const GpuccCompileOptions *opt, Stage last, Compiled *out, Diag *d) {
  return pipeline_run_part(g, opt, STAGE_PASSES, last, NULL, NULL, out, d);
}

int pipeline_run_part(Graph *g, const GpuccCompileOptions *opt, Stage first, Stage last,
                      CodegenShared *shared, const char *prefix, Compiled *out, Diag *d) {
  static const GpuccCompileOptions none;
  memset(out, 0, sizeof *out);
  if (!opt)
    opt = &none;
  Target *t = &out->build.target;
  if (opt->target)
    *t = *opt->target;
  else if (target_for_arch(opt->arch, t, d))
    return -1;
  if (target_check(t, d))
    return -1;
  const char *arch = t->arch;
  snprintf(out->build.arch, sizeof out->build.arch, "%s", arch);
  if (opt->report) {
    char line[256];
    target_describe(t, line, sizeof line);
    fprintf(opt->report, "gpucc: target %s\n", line);
  }

  if (first <= STAGE_PASSES && opt->progress)
    opt->progress(opt->progress_arg, "passes", 0, 1);
  int rc = first <= STAGE_PASSES && (pipeline_bind_dims(g, opt, d) || run_passes(g, opt, t, d));
  if (!rc && last >= STAGE_CODEGEN && opt->progress)
    opt->progress(opt->progress_arg, "codegen", 0, 1);
  if (!rc && last >= STAGE_CODEGEN) {
    CodegenOptions co = {.target = t, .variants = opt->variants, .prefix = prefix,
                         .shared = shared};
    rc = !(out->program = codegen_graph(g, &co, d));
  }
  if (!rc && last >= STAGE_MEMPLAN)
    rc = check_limits(g, out->program, d) || memplan_build(g, out->program, &out->memplan, d);
  /* A program without kernels needs no module, unless the module is what was asked for
   * (--emit=cubin). */
  if (!rc && last >= STAGE_NVRTC && (has_kernels(out->program) || last == STAGE_NVRTC)) {
    /* --emit=cubin: the whole source as one unit; a model: units compiled in parallel */
    NvrtcOptions nopt = {.arch = arch, .no_cache = opt->no_cache, .cache_dir = opt->cache_dir,
                         .progress = opt->progress, .progress_arg = opt->progress_arg};
    const char *base = g->name && *g->name ? g->name : "model";
    char name[256];
    snprintf(name, sizeof name, "%s.cu", base);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const Program *p = out->program;
    if (last == STAGE_NVRTC) {
      rc = nvrtc_compile(p->source, name, &nopt, &out->binary, d) != 0;
      out->units = &out->binary;
      out->nunits = 1;
    } else {
      rc = nvrtc_compile_split(p->source, p->cuts, p->ncuts, FIXED_UNIT_BYTES, base, &nopt,
                               &out->units, &out->nunits, d);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc && opt->report)
      report_variants(p, out->units, out->nunits,
                      (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
                      opt->report);
  } else if (!rc && last >= STAGE_CODEGEN && opt->report) {
    report_variants(out->program, NULL, 0, 0, opt->report);
  }
  if (!rc && last >= STAGE_PLAN)
    rc = make_plan(g, out, d);
  if (rc) {
    compiled_free(out);
    return -1;
  }
  return 0;
}

void compiled_free(Compiled *c) {
  program_free(c->program);
  memplan_free(&c->memplan);
  if (c->units != &c->binary) {
    for (int u = 0; u < c->nunits; u++)
      nvrtc_output_free(&c->units[u]);
    free(c->units);
  }
  nvrtc_output_free(&c->binary);
  gpucc_build_free(&c->build);
  memset(c, 0, sizeof *c);
}

int pipeline_onnx_options(const GpuccCompileOptions *opt, OnnxOptions *lo,
                          GpuccCompileOptions *rest, void **mem, Diag *d) {
  *rest = *opt;
  *lo = opt->onnx ? *opt->onnx : (OnnxOptions){0};
  /* the bindings, then each size as text (the loader's form of --dim) */
  enum { SIZE_CHARS = 24 };
  size_t n = (size_t)opt->ndims;
  *mem = calloc(n + 1, sizeof(OnnxBinding) + SIZE_CHARS);
  if (!*mem)
    return diag_error(d, (SrcLoc){0}, "out of memory");
  OnnxBinding *dims = *mem;
  char *text = (char *)(dims + n + 1);
  for (size_t i = 0; i < n; i++) {
    char *v = text + i * SIZE_CHARS;
    snprintf(v, SIZE_CHARS, "%lld", (long long)opt->dim_sizes[i]);
    dims[i] = (OnnxBinding){opt->dim_names[i], v};
  }
  lo->dims = dims;
  lo->ndims = opt->ndims;
  rest->ndims = 0;
  rest->dim_names = NULL;
  rest->dim_sizes = NULL;
  return 0;
}

/* ---------------------------------------------------------------- gpucc_build */

/* The plan and weights of a finished pipeline as gpucc_build's result (c keeps the rest). */
static int take_build(int rc, Compiled *c, GpuccBuild *out) {
  *out = c->build;
  memset(&c->build, 0, sizeof c->build);
  compiled_free(c);
  return rc;
}

void graph_unbind_ranged(Graph *g, const DimRange *ranges, int nr) {
  for (int k = 0; k < g->nbound; k++)
    for (int r = 0; r < nr; r++)
      if (!strcmp(g->bound[k].sym, ranges[r].sym))
        g->inputs[g->bound[k].input]->type.shape.dims[g->bound[k].axis] =
            (Dim){-1, graph_intern(g, ranges[r].sym)};
}

/* A graph with ranged dims: one plan of its shape classes. */
static int build_classes(Graph *g, const GpuccCompileOptions *opt, ClassLoad load, void *arg,
                         GpuccBuild *out, Diag *d) {
  GpuccCompileOptions ro = {.ranges = opt ? opt->ranges : NULL, .nranges = opt ? opt->nranges : 0};
  ClassesBuilt cb;
  memset(out, 0, sizeof *out);
  if (pipeline_bind_dims(g, &ro, d) || classes_build(g, opt, load, arg, STAGE_PLAN, NULL, &cb, d))
    return -1;
  *out = cb.build;
  memset(&cb.build, 0, sizeof cb.build);
  classes_built_free(&cb);
  return 0;
}

int gpucc_build(Graph *g, const GpuccCompileOptions *opt, GpuccBuild *out, Diag *d) {
  if ((opt && opt->nranges) || g->nranges)
    return build_classes(g, opt, NULL, NULL, out, d);
  Compiled c;
  return take_build(pipeline_run(g, opt, STAGE_PLAN, &c, d), &c, out);
}

Graph *pipeline_load_onnx(const OnnxModel *m, const GpuccCompileOptions *opt,
                          const char *const *names, const int64_t *sizes, int n, Diag *d) {
  int nd = opt->ndims;
  const char **an = calloc((size_t)(nd + n) + 1, sizeof *an);
  int64_t *as = calloc((size_t)(nd + n) + 1, sizeof *as);
  Graph *g = NULL;
  if (!an || !as) {
    diag_error(d, (SrcLoc){0}, "out of memory");
  } else {
    for (int i = 0; i < nd; i++) {
      an[i] = opt->dim_names[i];
      as[i] = opt->dim_sizes[i];
    }
    for (int i = 0; i < n; i++) {
      an[nd + i] = names[i];
      as[nd + i] = sizes[i];
    }
    GpuccCompileOptions o = *opt, rest;
    o.dim_names = an;
    o.dim_sizes = as;
    o.ndims = nd + n;
    OnnxOptions lo;
    void *mem = NULL;
    if (!pipeline_onnx_options(&o, &lo, &rest, &mem, d))
      g = onnx_model_load(m, &lo, d);
    free(mem);
  }
  free(an);
  free(as);
  return g;
}

Graph *pipeline_load_onnx_ranged(const OnnxModel *m, const GpuccCompileOptions *opt, Diag *d) {
  const char *names[GPUCC_MAX_SYMBOLS];
  int64_t sizes[GPUCC_MAX_SYMBOLS];
  int n = opt->nranges;
  if (n > GPUCC_MAX_SYMBOLS) {
    diag_error(d, (SrcLoc){0}, "%d ranged dims; a model takes at most %d", n, GPUCC_MAX_SYMBOLS);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    names[i] = opt->ranges[i].sym;
    sizes[i] = range_max(&opt->ranges[i]);
  }
  Graph *g = pipeline_load_onnx(m, opt, names, sizes, n, d);
  if (g)
    graph_unbind_ranged(g, opt->ranges, n);
  return g;
}

/* The class loader of an ONNX model in memory (ClassLoad): its model, parsed once, and
 * the options whose dims it binds too. */
typedef struct OnnxAt {
  const OnnxModel *model;
  const GpuccCompileOptions *opt;
} OnnxAt;

static Graph *load_onnx_at(void *arg, const char *const *names, const int64_t *sizes, int n,
                           Diag *d) {
  const OnnxAt *k = arg;
  return pipeline_load_onnx(k->model, k->opt, names, sizes, n, d);
}

int gpucc_build_onnx(const void *bytes, size_t len, const char *name,
                     const GpuccCompileOptions *opt, GpuccBuild *out, Diag *d) {
  static const GpuccCompileOptions none;
  memset(out, 0, sizeof *out);
  if (opt && opt->nranges) {
    /* loaded at the top of each range, its ranged axes symbolic again; each class loads
     * it at its bounds */
    OnnxModel *model =
        onnx_open_bytes(bytes, len, name, opt->onnx ? opt->onnx->base_dir : NULL, d);
    if (!model)
      return -1;
    OnnxAt k = {model, opt};
    Graph *g = pipeline_load_onnx_ranged(model, opt, d);
    int rc = -1;
    if (g) {
      GpuccCompileOptions rest = *opt;
      rest.ndims = 0;
      rc = build_classes(g, &rest, load_onnx_at, &k, out, d);
    }
    graph_free(g);
    onnx_close(model);
    return rc;
  }
  OnnxOptions lo;
  GpuccCompileOptions rest;
  void *mem;
  if (pipeline_onnx_options(opt ? opt : &none, &lo, &rest, &mem, d))
    return -1;
  Graph *g = onnx_load_bytes(bytes, len, name, &lo, d);
  free(mem);
  if (!g)
    return -1;
  int rc = gpucc_build(g, &rest, out, d);
  graph_free(g);
  return rc;
}

void gpucc_build_free(GpuccBuild *b) {
  free(b->plan);
  free(b->weights);
  memset(b, 0, sizeof *b);
}
