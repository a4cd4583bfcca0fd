//! The README's C quickstart must be exactly `examples/quickstart_readme.c`, which the C
//! harness compiles and runs.

#[test]
fn readme_quickstart_is_the_example_file() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme.find("```c\n").expect("README has a C block") + 5;
    let end = start + readme[start..].find("```").expect("closed block");
    let example = std::fs::read_to_string(format!("{root}/examples/quickstart_readme.c")).unwrap();
    assert_eq!(
        &readme[start..end],
        example,
        "README quickstart and examples/quickstart_readme.c differ"
    );
}
