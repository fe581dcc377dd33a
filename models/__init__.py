"""Builders for the small ONNX models used by the demo, the tests and the benchmarks.

Each builder returns an onnx.ModelProto written in the op patterns real exporters
produce, with random weights; no network is needed.

    python -m models.build list                       # every named model
    python -m models.build bert_tiny -o /tmp/x.onnx   # [--dtype float16] [--seed N] [--external-data]
    from models.build import build, example_inputs    # build("llama_tiny", dtype="float16")

Modules:
    build          named models (bert_tiny, bert_tiny_decomposed*, bert_tiny_dynamic, bert_base,
                   gpt_tiny*, llama_tiny* (incl. llama_tiny_gqa* and llama_tiny_attention_op with the
                   ONNX Attention op), vit_tiny, and the conv nets resnet_tiny, regnet_tiny,
                   mobilenet_tiny, efficientnet_tiny, convnext_tiny*, conv1d_tiny, conv3d_tiny,
                   unet_tiny), the benchmark sizes BASE_MODELS (bert_base_dynamic, gpt2_small,
                   llama_small_gqa, vit_base, resnet50; scripts/bench_models.py), example_inputs()
                   (dims= for symbolic axes), save(), the CLI
    transformer    BERT / GPT-2 / Llama / ViT builders with every layer-norm / RMS-norm form and
                   the attention forms exporters write (padding mask, causal Where, GQA
                   repeat_kv + rotary, timm fused QKV, the ONNX Attention op)
    attention_patterns  single-attention graphs with switches for each attention rule check,
                   one ONNX Attention node, one com.microsoft MultiHeadAttention node
    convnets       ResNet (basic and bottleneck: resnet_bottleneck = ResNet-50) / RegNet / MobileNet / EfficientNet / ConvNeXt / 1-D / 3-D / U-Net builders
    norm_patterns  single-norm graphs with switches for each rewriter check (tests)
    reference      numpy references of the trt_fastops ops for onnx.reference (run_reference),
                   including conv_reference / resolve_conv for Conv and ConvTranspose
"""
