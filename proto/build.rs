//! Compile `proto/bookfarm/v1/*.proto` with protox (pure Rust, no system `protoc`) and generate the
//! tonic/prost code with tonic-prost-build.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from("proto");
    let protos = ["proto/bookfarm/v1/coordinator.proto"];
    let fds = protox::compile(protos, [&proto_dir])?;

    // The encoded descriptor set, for reflection or grpcurl.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("bookfarm_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    tonic_prost_build::configure()
        // compile_protos() adds this by itself; compile_fds() does not.
        .type_attribute(".", "#[allow(clippy::all)]")
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;

    // compile_fds() does not know the source paths.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", proto_dir.display());
    Ok(())
}
