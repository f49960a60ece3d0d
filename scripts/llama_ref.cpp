// llama.cpp as a reference for ragd's LLM engine: tokenization, greedy decoding and raw
// logits of one GGUF, computed by llama.cpp's own library (built by
// scripts/llama_ref.sh against the static libraries of ../shared/tools/build_llama_bench.sh).
//
// Usage: ragd-llama-ref MODEL MODE [ARG]   (input on stdin, output on stdout)
//   tokenize        text in; token ids out (BOS as the model adds it), one line
//   tokenize-raw    the same without BOS or other special tokens added
//                   (several texts separated by "\n__ggml_vocab_test__\n": a line each)
//   greedy N        token ids in; the N greedy next tokens out, one line (stops at EOG)
//   top K           token ids in; for every position, the K highest logits as
//                   "id:logit" pairs, one line per position
//   logits LAST     token ids in; the logits of the last LAST positions, little-endian f32,
//                   LAST rows of the vocabulary size
// env: REF_CTX (context window, default: enough for the input, at least 512),
//      REF_THREADS (default 2), REF_FLASH_ATTN (1: llama.cpp's flash attention; default
//      off, as ragd's attention).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static std::vector<llama_token> read_ids() {
    std::vector<llama_token> ids;
    long v;
    while (std::cin >> v) ids.push_back((llama_token) v);
    return ids;
}

static int env_int(const char * name, int def) {
    const char * v = getenv(name);
    return v && *v ? atoi(v) : def;
}

// Runs `ids` from position `pos`, asking for the logits of the tokens from index `first_out`
// on (the last token's always).
static bool run(llama_context * ctx, const std::vector<llama_token> & ids, int pos, int first_out) {
    const int n_batch = (int) llama_n_batch(ctx);
    for (int start = 0; start < (int) ids.size(); start += n_batch) {
        const int n = std::min(n_batch, (int) ids.size() - start);
        llama_batch b = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; i++) {
            b.token[i] = ids[start + i];
            b.pos[i] = pos + start + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = start + i >= first_out || start + i == (int) ids.size() - 1;
        }
        b.n_tokens = n;
        const int rc = llama_decode(ctx, b);
        llama_batch_free(b);
        if (rc != 0) {
            fprintf(stderr, "llama_decode failed: %d\n", rc);
            return false;
        }
    }
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL tokenize|tokenize-raw|greedy N|top K|logits LAST\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[2];
    const int arg = argc > 3 ? atoi(argv[3]) : 0;
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    // REF_PLAIN=1: llama.cpp's plain kernels, without its extra (repacked, AMX) weight
    // buffers, whose AMX path crashes where the CPU shows AMX but the VM denies its state.
    if (const char * plain = getenv("REF_PLAIN"); plain && plain[0] == '1') {
        mp.use_extra_bufts = false;
    }
    mp.progress_callback = [](float, void *) { return true; };
    // Tokenizing needs only the vocabulary (vocabulary-only test files have no weights).
    mp.vocab_only = mode == "tokenize" || mode == "tokenize-raw";
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    if (mode == "tokenize" || mode == "tokenize-raw") {
        std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        const bool add_special = mode == "tokenize";
        // Several texts at once: separated as llama.cpp's tokenizer tests separate them.
        const std::string sep = "\n__ggml_vocab_test__\n";
        size_t at = 0;
        while (true) {
            const size_t end = input.find(sep, at);
            const std::string text = input.substr(at, end == std::string::npos ? std::string::npos : end - at);
            std::vector<llama_token> ids(text.size() + 8);
            int n = llama_tokenize(vocab, text.data(), (int) text.size(), ids.data(), (int) ids.size(), add_special, false);
            if (n < 0) return 1;
            for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            printf("\n");
            if (end == std::string::npos) break;
            at = end + sep.size();
        }
        return 0;
    }

    std::vector<llama_token> ids = read_ids();
    if (ids.empty()) {
        fprintf(stderr, "no token ids on stdin\n");
        return 2;
    }
    const int need = (int) ids.size() + (mode == "greedy" ? arg : 0) + 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = env_int("REF_CTX", std::max(512, ((need + 255) / 256) * 256));
    // One batch for every token whose logits are read: llama_get_logits_ith indexes the
    // last batch.
    cp.n_batch = cp.n_ubatch = mode == "greedy" ? 512 : std::max<int>(512, (int) ids.size());
    cp.n_threads = cp.n_threads_batch = env_int("REF_THREADS", 2);
    cp.flash_attn_type = env_int("REF_FLASH_ATTN", 0) ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                                       : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }

    int rc = 0;
    if (mode == "greedy") {
        if (!run(ctx, ids, 0, (int) ids.size())) return 1;
        int pos = (int) ids.size();
        std::vector<llama_token> out;
        for (int i = 0; i < arg; i++) {
            const float * l = llama_get_logits_ith(ctx, -1);
            const llama_token t = (llama_token) (std::max_element(l, l + n_vocab) - l);
            out.push_back(t);
            if (llama_vocab_is_eog(vocab, t)) break;
            if (!run(ctx, {t}, pos++, 1)) return 1;
        }
        for (size_t i = 0; i < out.size(); i++) printf(i ? " %d" : "%d", out[i]);
        printf("\n");
    } else if (mode == "top") {
        if (!run(ctx, ids, 0, 0)) return 1;
        std::vector<int> order(n_vocab);
        for (int p = 0; p < (int) ids.size(); p++) {
            const float * l = llama_get_logits_ith(ctx, p);
            for (int i = 0; i < n_vocab; i++) order[i] = i;
            const int k = std::min(std::max(arg, 1), n_vocab);
            std::partial_sort(order.begin(), order.begin() + k, order.end(),
                              [&](int a, int b) { return l[a] > l[b]; });
            for (int i = 0; i < k; i++) printf(i ? " %d:%.6f" : "%d:%.6f", order[i], l[order[i]]);
            printf("\n");
        }
    } else if (mode == "logits") {
        const int last = std::min(std::max(arg, 1), (int) ids.size());
        if (!run(ctx, ids, 0, (int) ids.size() - last)) return 1;
        for (int p = (int) ids.size() - last; p < (int) ids.size(); p++) {
            fwrite(llama_get_logits_ith(ctx, p), sizeof(float), n_vocab, stdout);
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode.c_str());
        rc = 2;
    }
    llama_free(ctx);
    llama_model_free(model);
    return rc;
}
