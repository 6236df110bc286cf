//! AES-GCM for short packets with AES-NI and PCLMULQDQ, in one fused pass
//! (work in progress: see issue 5).
