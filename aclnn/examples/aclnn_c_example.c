/* aclnnConvolutionBackward from plain C: a small 3D convolution (fp32, NCDHW), the two-phase
 * API (plan, then run on a caller-allocated workspace), checked against a direct reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_convolution_backward.h"

/* input [N, CI, D, H, W], weight [CO, CI, KD, KH, KW], gradOutput [N, CO, OD, OH, OW] */
enum { N = 1, CI = 2, D = 3, H = 4, W = 5, CO = 3, KD = 2, KH = 3, KW = 3 };
static const int64_t kStride[3] = {1, 1, 2}, kPad[3] = {0, 1, 1}, kDil[3] = {1, 1, 1};
enum { OD = (D + 2 * 0 - (KD - 1) - 1) / 1 + 1, OH = (H + 2 * 1 - (KH - 1) - 1) / 1 + 1,
       OW = (W + 2 * 1 - (KW - 1) - 1) / 2 + 1 };

#define X_AT(n, c, d, h, w) ((((n) * CI + (c)) * D + (d)) * H + (h)) * W + (w)
#define W_AT(o, c, d, h, w) ((((o) * CI + (c)) * KD + (d)) * KH + (h)) * KW + (w)
#define Y_AT(n, c, d, h, w) ((((n) * CO + (c)) * OD + (d)) * OH + (h)) * OW + (w)

static float x[N * CI * D * H * W], wt[CO * CI * KD * KH * KW], dy[N * CO * OD * OH * OW];
static float dx[N * CI * D * H * W], dw[CO * CI * KD * KH * KW], db[CO];
static double ref_dx[N * CI * D * H * W], ref_dw[CO * CI * KD * KH * KW], ref_db[CO];

/* Multiples of 1/8 in [-1, 1]: every product and sum here is exact in fp32. */
static void fill(float *v, int count, unsigned *state) {
  int i;
  for (i = 0; i < count; ++i) {
    *state = *state * 1103515245u + 12345u;
    v[i] = (float)((int)((*state >> 16) % 17) - 8) / 8.0f;
  }
}

static void reference(void) {
  int n, o, c, od, oh, ow, kd, kh, kw;
  for (n = 0; n < N; ++n)
    for (o = 0; o < CO; ++o)
      for (od = 0; od < OD; ++od)
        for (oh = 0; oh < OH; ++oh)
          for (ow = 0; ow < OW; ++ow) {
            const double g = dy[Y_AT(n, o, od, oh, ow)];
            ref_db[o] += g;
            for (c = 0; c < CI; ++c)
              for (kd = 0; kd < KD; ++kd)
                for (kh = 0; kh < KH; ++kh)
                  for (kw = 0; kw < KW; ++kw) {
                    const int id = od * (int)kStride[0] + kd * (int)kDil[0] - (int)kPad[0];
                    const int ih = oh * (int)kStride[1] + kh * (int)kDil[1] - (int)kPad[1];
                    const int iw = ow * (int)kStride[2] + kw * (int)kDil[2] - (int)kPad[2];
                    if (id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    ref_dx[X_AT(n, c, id, ih, iw)] += g * wt[W_AT(o, c, kd, kh, kw)];
                    ref_dw[W_AT(o, c, kd, kh, kw)] += g * x[X_AT(n, c, id, ih, iw)];
                  }
          }
}

static int compare(const char *name, const float *got, const double *want, int count) {
  int i, bad = 0;
  for (i = 0; i < count; ++i)
    if (fabs(got[i] - want[i]) > 1e-5 * (1.0 + fabs(want[i]))) {
      if (++bad <= 3) fprintf(stderr, "%s[%d] = %g, expected %g\n", name, i, got[i], want[i]);
    }
  return bad;
}

static int fail(const char *what, aclnnStatus status) {
  fprintf(stderr, "aclnn_c_example: %s failed with %d: %s\n", what, (int)status,
          aclGetRecentErrMsg());
  return 1;
}

int main(void) {
  const int64_t x_dims[5] = {N, CI, D, H, W}, w_dims[5] = {CO, CI, KD, KH, KW};
  const int64_t y_dims[5] = {N, CO, OD, OH, OW}, b_dims[1] = {CO};
  const int64_t bias_sizes[1] = {CO}, out_pad[3] = {0, 0, 0};
  const bool mask_values[3] = {true, true, true};
  unsigned state = 2024u;
  aclTensor *t_x, *t_w, *t_dy, *t_dx, *t_dw, *t_db;
  aclIntArray *a_bias, *a_stride, *a_pad, *a_dil, *a_out_pad;
  aclBoolArray *a_mask;
  uint64_t workspace_size = 0;
  aclOpExecutor *executor = NULL;
  void *workspace = NULL;
  aclnnStatus status;
  int bad;

  fill(x, N * CI * D * H * W, &state);
  fill(wt, CO * CI * KD * KH * KW, &state);
  fill(dy, N * CO * OD * OH * OW, &state);

  /* Dense views: null strides, storage = what the view covers. */
  t_x = aclCreateTensor(x_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, NULL, 0, x);
  t_w = aclCreateTensor(w_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, NULL, 0, wt);
  t_dy = aclCreateTensor(y_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, NULL, 0, dy);
  t_dx = aclCreateTensor(x_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, NULL, 0, dx);
  t_dw = aclCreateTensor(w_dims, 5, ACL_FLOAT, NULL, 0, ACL_FORMAT_NCDHW, NULL, 0, dw);
  t_db = aclCreateTensor(b_dims, 1, ACL_FLOAT, NULL, 0, ACL_FORMAT_ND, NULL, 0, db);
  a_bias = aclCreateIntArray(bias_sizes, 1);
  a_stride = aclCreateIntArray(kStride, 3);
  a_pad = aclCreateIntArray(kPad, 3);
  a_dil = aclCreateIntArray(kDil, 3);
  a_out_pad = aclCreateIntArray(out_pad, 3);
  a_mask = aclCreateBoolArray(mask_values, 3);
  if (!t_x || !t_w || !t_dy || !t_dx || !t_dw || !t_db || !a_bias || !a_stride || !a_pad ||
      !a_dil || !a_out_pad || !a_mask)
    return fail("creating the tensors and arrays", ACLNN_ERR_INNER);

  status = aclnnConvolutionBackwardGetWorkspaceSize(
      t_dy, t_x, t_w, a_bias, a_stride, a_pad, a_dil, false, a_out_pad, 1, a_mask,
      ACLNN_CUBE_MATH_KEEP_DTYPE, t_dx, t_dw, t_db, &workspace_size, &executor);
  if (status != ACLNN_SUCCESS) return fail("aclnnConvolutionBackwardGetWorkspaceSize", status);
  if (workspace_size > 0) {
    workspace = malloc((size_t)workspace_size);
    if (!workspace) return fail("allocating the workspace", ACLNN_ERR_INNER);
  }
  status = aclnnConvolutionBackward(workspace, workspace_size, executor, NULL);
  if (status != ACLNN_SUCCESS) return fail("aclnnConvolutionBackward", status);

  reference();
  bad = compare("gradInput", dx, ref_dx, N * CI * D * H * W) +
        compare("gradWeight", dw, ref_dw, CO * CI * KD * KH * KW) + compare("gradBias", db, ref_db, CO);

  free(workspace);
  aclDestroyTensor(t_x);
  aclDestroyTensor(t_w);
  aclDestroyTensor(t_dy);
  aclDestroyTensor(t_dx);
  aclDestroyTensor(t_dw);
  aclDestroyTensor(t_db);
  aclDestroyIntArray(a_bias);
  aclDestroyIntArray(a_stride);
  aclDestroyIntArray(a_pad);
  aclDestroyIntArray(a_dil);
  aclDestroyIntArray(a_out_pad);
  aclDestroyBoolArray(a_mask);
  if (bad) {
    fprintf(stderr, "aclnn_c_example: %d values differ from the reference\n", bad);
    return 1;
  }
  printf("aclnn_c_example: OK (workspace %llu bytes)\n", (unsigned long long)workspace_size);
  return 0;
}
