//! Raft/controller RPC frames: the JSON body of a frame as the raft port
//! receives it after the handshake, decoded as a request (and as a
//! response, which the client side decodes).
#![no_main]

use chronik_metadata::rpc::{decode, RpcRequest, RpcResponse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode::<RpcRequest>(data);
    let _ = decode::<RpcResponse>(data);
});
