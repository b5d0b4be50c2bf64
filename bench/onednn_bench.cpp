// onednn_bench: time one conv3d backward pass (dW = convolution_backward_weights,
// dX = convolution_backward_data) with oneDNN's C++ API, for comparison with tbex.
//
// Usage:
//   onednn_bench --info
//   onednn_bench pass=dw|dx dtype=f32|f16|bf16 N=.. Cin=.. D=.. H=.. W=.. Cout=.. Kd=.. Kh=.. Kw=..
//                [sd= sh= sw=] [pf= pb= pt= pbot= pl= pr=] [dd= dh= dw=] [groups=]
//                [min_time=0.5] [min_iters=3] [max_iters=50] [warmup=1] [warmup_time=0]
//                [time_ref=0]
//   (keys may also be given as --key=value; dilation is given the PyTorch/TBE way, 1 = dense)
//
// Prints one JSON line on stdout. Threads: oneDNN's CPU runtime decides (OpenMP builds read
// OMP_NUM_THREADS, which the driver sets); the JSON reports the runtime and the env value.
//
// Where oneDNN has only its reference implementation ("ref:any": scalar loops, minutes for a
// large layer, e.g. f16 dW on a CPU without AVX512-FP16 backward kernels) the pass is reported
// unsupported, with the impl named, unless time_ref=1.
//
// All tensors of the primitive use format_tag::any; the user tensors are plain (ncdhw for
// activations, oidhw / goidhw for weights) in the benchmark dtype, and the reorders between the
// two are timed separately (reorder_ms).

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

std::string json_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                    o += buf;
                } else {
                    o += c;
                }
        }
    }
    return o;
}

const char *runtime_name(unsigned rt) {
    switch (rt) {
        case DNNL_RUNTIME_NONE: return "none";
        case DNNL_RUNTIME_SEQ: return "seq";
        case DNNL_RUNTIME_OMP: return "omp";
        case DNNL_RUNTIME_TBB: return "tbb";
        case DNNL_RUNTIME_THREADPOOL: return "threadpool";
        case DNNL_RUNTIME_OCL: return "ocl";
        case DNNL_RUNTIME_SYCL: return "sycl";
        default: return "unknown";
    }
}

const char *isa_name(cpu_isa isa) {
    switch (isa) {
        case cpu_isa::sse41: return "sse41";
        case cpu_isa::avx: return "avx";
        case cpu_isa::avx2: return "avx2";
        case cpu_isa::avx2_vnni: return "avx2_vnni";
        case cpu_isa::avx512_core: return "avx512_core";
        case cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
        case cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
        case cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
        case cpu_isa::avx512_core_amx: return "avx512_core_amx";
        default: return "other";
    }
}

std::string version_string() {
    const dnnl_version_t *v = dnnl_version();
    std::ostringstream os;
    os << v->major << "." << v->minor << "." << v->patch;
    return os.str();
}

std::string common_json() {
    const dnnl_version_t *v = dnnl_version();
    const char *omp = std::getenv("OMP_NUM_THREADS");
    std::ostringstream os;
    os << "\"onednn_version\":\"" << version_string() << "\",\"cpu_runtime\":\""
       << runtime_name(v->cpu_runtime) << "\",\"isa\":\""
       << (engine::get_count(engine::kind::cpu) > 0 ? isa_name(get_effective_cpu_isa()) : "n/a")
       << "\",\"omp_num_threads\":"
       << (omp ? ("\"" + json_escape(omp) + "\"") : std::string("null"));
    return os.str();
}

double now_ms() {
    using clk = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clk::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
    double median_ms = 0, min_ms = 0;
    int iters = 0;
};

struct TimingCfg {
    double min_time_ms = 500;  // keep iterating until this much time is spent...
    int min_iters = 3;         // ...but at least this many iterations
    int max_iters = 50;        // ...and at most this many
    int warmup = 1;
    double warmup_time_ms = 0;  // warm-up runs continue until this much time is spent too
};

// Warm-up, then repeat until min_time is spent (bounded by [min_iters, max_iters]).
// When one run takes longer than min_time, only min(min_iters, ...) runs are done; if a single
// warm-up run already exceeds 4*min_time, one timed run is enough.
Timing time_it(const std::function<void()> &fn, const TimingCfg &cfg) {
    double first = 0, warmed = 0;
    for (int i = 0; i < cfg.warmup || (i > 0 && warmed < cfg.warmup_time_ms); ++i) {
        double t0 = now_ms();
        fn();
        double t = now_ms() - t0;
        if (i == 0) first = t;
        warmed += t;
        if (i == 0 && first > 10 * cfg.min_time_ms) break;  // one slow run warms enough
    }
    int lo = cfg.min_iters;
    if (cfg.warmup > 0 && first > 4 * cfg.min_time_ms) lo = 1;
    std::vector<double> ts;
    double spent = 0;
    while ((int)ts.size() < cfg.max_iters && ((int)ts.size() < lo || spent < cfg.min_time_ms)) {
        double t0 = now_ms();
        fn();
        double t = now_ms() - t0;
        ts.push_back(t);
        spent += t;
    }
    Timing r;
    r.median_ms = median(ts);
    r.min_ms = *std::min_element(ts.begin(), ts.end());
    r.iters = (int)ts.size();
    return r;
}

dt parse_dt(const std::string &s) {
    if (s == "f32") return dt::f32;
    if (s == "f16") return dt::f16;
    if (s == "bf16") return dt::bf16;
    throw std::invalid_argument("dtype must be f32|f16|bf16, got " + s);
}

const char *dt_name(dt d) {
    switch (d) {
        case dt::f32: return "f32";
        case dt::f16: return "f16";
        case dt::bf16: return "bf16";
        default: return "other";
    }
}

void fill_random(memory &m, uint32_t seed) {
    // m is a plain f32 memory
    float *p = static_cast<float *>(m.get_data_handle());
    size_t n = m.get_desc().get_size() / sizeof(float);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (size_t i = 0; i < n; ++i) p[i] = dist(gen);
}

// Make a plain memory of dtype `d` with random contents (generated in f32, then converted).
memory make_plain_random(const engine &eng, stream &strm, const memory::dims &dims, tag t, dt d,
                         uint32_t seed) {
    memory f(memory::desc(dims, dt::f32, t), eng);
    fill_random(f, seed);
    if (d == dt::f32) return f;
    memory m(memory::desc(dims, d, t), eng);
    reorder(f, m).execute(strm, f, m);
    strm.wait();
    return m;
}

struct Args {
    std::map<std::string, std::string> kv;
    long get(const std::string &k, long def) const {
        auto it = kv.find(k);
        return it == kv.end() ? def : std::stol(it->second);
    }
    long req(const std::string &k) const {
        auto it = kv.find(k);
        if (it == kv.end()) throw std::invalid_argument("missing argument " + k + "=...");
        return std::stol(it->second);
    }
    double getf(const std::string &k, double def) const {
        auto it = kv.find(k);
        return it == kv.end() ? def : std::stod(it->second);
    }
    std::string gets(const std::string &k, const std::string &def) const {
        auto it = kv.find(k);
        return it == kv.end() ? def : it->second;
    }
};

int print_info() {
    const dnnl_version_t *v = dnnl_version();
    size_t n_cpu = engine::get_count(engine::kind::cpu);
    std::printf("{\"impl\":\"onednn\",\"info\":true,%s,\"hash\":\"%s\",\"cpu_engines\":%zu}\n",
                common_json().c_str(), v->hash, n_cpu);
    return n_cpu > 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        if (s == "--info" || s == "info") return print_info();
        while (!s.empty() && s[0] == '-') s.erase(0, 1);
        auto eq = s.find('=');
        if (eq == std::string::npos) {
            std::fprintf(stderr, "bad argument '%s' (expected key=value)\n", argv[i]);
            return 2;
        }
        a.kv[s.substr(0, eq)] = s.substr(eq + 1);
    }

    std::string pass = a.gets("pass", "dw");
    std::string dtype_s = a.gets("dtype", "f32");
    std::ostringstream head;  // fields common to every output line
    head << "\"impl\":\"onednn\",\"pass\":\"" << json_escape(pass) << "\",\"dtype\":\""
         << json_escape(dtype_s) << "\"," << common_json();

    try {
        if (pass != "dw" && pass != "dx") throw std::invalid_argument("pass must be dw|dx");
        const dt in_dt = parse_dt(dtype_s);
        const long N = a.req("N"), Cin = a.req("Cin"), D = a.req("D"), H = a.req("H"),
                   W = a.req("W"), Cout = a.req("Cout"), Kd = a.req("Kd"), Kh = a.req("Kh"),
                   Kw = a.req("Kw");
        const long sd = a.get("sd", 1), sh = a.get("sh", 1), sw = a.get("sw", 1);
        const long pf = a.get("pf", 0), pb = a.get("pb", 0), pt = a.get("pt", 0),
                   pbot = a.get("pbot", 0), pl = a.get("pl", 0), pr = a.get("pr", 0);
        const long dd = a.get("dd", 1), dh = a.get("dh", 1), dwl = a.get("dw", 1);
        const long G = a.get("groups", 1);
        if (G < 1 || Cin % G || Cout % G) throw std::invalid_argument("bad groups");
        auto out_size = [](long in, long p0, long p1, long k, long dil, long s) {
            return (in + p0 + p1 - ((k - 1) * dil + 1)) / s + 1;
        };
        const long Do = out_size(D, pf, pb, Kd, dd, sd), Ho = out_size(H, pt, pbot, Kh, dh, sh),
                   Wo = out_size(W, pl, pr, Kw, dwl, sw);
        if (Do <= 0 || Ho <= 0 || Wo <= 0) throw std::invalid_argument("empty output");

        TimingCfg tc;
        tc.min_time_ms = 1000.0 * a.getf("min_time", 0.5);
        tc.min_iters = (int)a.get("min_iters", 3);
        tc.max_iters = (int)a.get("max_iters", 50);
        tc.warmup = (int)a.get("warmup", 1);
        tc.warmup_time_ms = 1000.0 * a.getf("warmup_time", 0.0);

        engine eng(engine::kind::cpu, 0);
        stream strm(eng);

        const memory::dims src_dims = {N, Cin, D, H, W};
        const memory::dims dst_dims = {N, Cout, Do, Ho, Wo};
        const memory::dims wei_dims =
                G == 1 ? memory::dims {Cout, Cin, Kd, Kh, Kw}
                       : memory::dims {G, Cout / G, Cin / G, Kd, Kh, Kw};
        const tag wei_tag = G == 1 ? tag::oidhw : tag::goidhw;
        const memory::dims strides = {sd, sh, sw};
        const memory::dims dil = {dd - 1, dh - 1, dwl - 1};  // oneDNN: 0 = dense
        const memory::dims pad_l = {pf, pt, pl}, pad_r = {pb, pbot, pr};

        // The output of the backward pass is f32 when oneDNN allows it, else the input dtype.
        std::vector<dt> out_candidates = {dt::f32};
        if (in_dt != dt::f32) out_candidates.push_back(in_dt);

        auto any = [](const memory::dims &d, dt t) { return memory::desc(d, t, tag::any); };

        // Forward hint: all in the input dtype (what a training forward pass would use).
        convolution_forward::primitive_desc fwd_pd;
        try {
            fwd_pd = convolution_forward::primitive_desc(
                    eng, prop_kind::forward_training, algorithm::convolution_direct,
                    any(src_dims, in_dt), any(wei_dims, in_dt), any(dst_dims, in_dt), strides,
                    dil, pad_l, pad_r);
        } catch (const dnnl::error &e) {
            std::printf("{%s,\"unsupported\":true,\"reason\":\"forward hint: %s\"}\n",
                        head.str().c_str(), json_escape(e.what()).c_str());
            return 0;
        }

        std::string impl, fail;
        dt out_dt = dt::undef;
        memory::desc src_md, wei_md, ddst_md, out_md;  // the primitive's chosen layouts
        primitive prim;
        int out_arg = 0;

        for (dt cand : out_candidates) {
            try {
                if (pass == "dw") {
                    auto pd = convolution_backward_weights::primitive_desc(
                            eng, algorithm::convolution_direct, any(src_dims, in_dt),
                            any(wei_dims, cand), any(dst_dims, in_dt), strides, dil, pad_l,
                            pad_r, fwd_pd);
                    impl = pd.impl_info_str();
                    src_md = pd.src_desc();
                    ddst_md = pd.diff_dst_desc();
                    out_md = pd.diff_weights_desc();
                    prim = convolution_backward_weights(pd);
                    out_arg = DNNL_ARG_DIFF_WEIGHTS;
                } else {
                    auto pd = convolution_backward_data::primitive_desc(eng,
                            algorithm::convolution_direct, any(src_dims, cand),
                            any(wei_dims, in_dt), any(dst_dims, in_dt), strides, dil, pad_l,
                            pad_r, fwd_pd);
                    impl = pd.impl_info_str();
                    wei_md = pd.weights_desc();
                    ddst_md = pd.diff_dst_desc();
                    out_md = pd.diff_src_desc();
                    prim = convolution_backward_data(pd);
                    out_arg = DNNL_ARG_DIFF_SRC;
                }
                out_dt = cand;
                break;
            } catch (const dnnl::error &e) {
                fail += std::string(dt_name(cand)) + " output: " + e.what() + "; ";
            }
        }
        if (out_dt == dt::undef) {
            std::printf("{%s,\"unsupported\":true,\"reason\":\"%s\"}\n", head.str().c_str(),
                        json_escape(fail).c_str());
            return 0;
        }

        if (impl.rfind("ref:", 0) == 0 && !a.get("time_ref", 0)) {
            std::printf("{%s,\"unsupported\":true,\"reason\":\"only oneDNN's reference "
                        "implementation (%s): not timed (time_ref=1 times it)\"}\n",
                        head.str().c_str(), json_escape(impl).c_str());
            return 0;
        }

        // User (plain) tensors.
        memory u_ddst = make_plain_random(eng, strm, dst_dims, tag::ncdhw, in_dt, 2);
        memory u_in;  // src (dW) or weights (dX)
        memory::desc in_md;
        int in_arg;
        memory::desc u_out_md;
        if (pass == "dw") {
            u_in = make_plain_random(eng, strm, src_dims, tag::ncdhw, in_dt, 1);
            in_md = src_md;
            in_arg = DNNL_ARG_SRC;
            u_out_md = memory::desc(wei_dims, out_dt, wei_tag);
        } else {
            u_in = make_plain_random(eng, strm, wei_dims, wei_tag, in_dt, 3);
            in_md = wei_md;
            in_arg = DNNL_ARG_WEIGHTS;
            u_out_md = memory::desc(src_dims, out_dt, tag::ncdhw);
        }
        memory u_out(u_out_md, eng);

        // Primitive-format tensors and the reorders to/from them.
        struct Reo {
            const char *what;
            memory from, to;
            reorder r;
        };
        std::vector<Reo> reos;
        auto prep_input = [&](memory &user, const memory::desc &md, const char *what) {
            if (md == user.get_desc()) return user;
            memory m(md, eng);
            reos.push_back({what, user, m, reorder(user, m)});
            return m;
        };
        memory p_ddst = prep_input(u_ddst, ddst_md, "diff_dst");
        memory p_in = prep_input(u_in, in_md, pass == "dw" ? "src" : "weights");
        memory p_out = u_out;
        bool out_reorder = !(out_md == u_out_md);
        if (out_reorder) {
            p_out = memory(out_md, eng);
            reos.push_back({pass == "dw" ? "diff_weights" : "diff_src", p_out, u_out,
                            reorder(p_out, u_out)});
        }

        // Run the input reorders once so the primitive's inputs hold the data.
        for (auto &r : reos)
            if (r.to.get() != u_out.get()) r.r.execute(strm, r.from, r.to);
        strm.wait();

        std::unordered_map<int, memory> args = {
                {in_arg, p_in}, {DNNL_ARG_DIFF_DST, p_ddst}, {out_arg, p_out}};
        Timing tp = time_it(
                [&] {
                    prim.execute(strm, args);
                    strm.wait();
                },
                tc);

        // Reorders: each timed on its own (shorter budget), summed.
        TimingCfg rtc = tc;
        rtc.min_time_ms = std::max(50.0, tc.min_time_ms / 4);
        double reorder_ms = 0;
        std::ostringstream rdet;
        for (size_t i = 0; i < reos.size(); ++i) {
            auto &r = reos[i];
            Timing t = time_it(
                    [&] {
                        r.r.execute(strm, r.from, r.to);
                        strm.wait();
                    },
                    rtc);
            reorder_ms += t.median_ms;
            rdet << (i ? "," : "") << "\"" << r.what << "\":" << t.median_ms;
        }

        double flops = 2.0 * N * Cout * Do * Ho * Wo * (double)(Cin / G) * Kd * Kh * Kw;
        std::printf("{%s,\"ms\":%.6g,\"min_ms\":%.6g,\"iters\":%d,\"reorder_ms\":%.6g,"
                    "\"reorders\":{%s},\"gflops\":%.6g,\"out_dtype\":\"%s\",\"impl_info\":\"%s\","
                    "\"out_shape\":[%ld,%ld,%ld]}\n",
                    head.str().c_str(), tp.median_ms, tp.min_ms, tp.iters, reorder_ms,
                    rdet.str().c_str(), flops / (tp.median_ms * 1e6), dt_name(out_dt),
                    json_escape(impl).c_str(), Do, Ho, Wo);
        return 0;
    } catch (const std::exception &e) {
        std::printf("{%s,\"error\":\"%s\"}\n", head.str().c_str(), json_escape(e.what()).c_str());
        return 1;
    }
}
