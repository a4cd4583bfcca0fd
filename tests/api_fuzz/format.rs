//! How tensors, handles, deps and callables are printed in the call log.

use crate::model::REGISTRY;
use dagrt::callable::Callable;
use dagrt::task::{Dep, TaskHandle, Tensor};

// ---------------------------------------------------------------------------------------
// Formatting for the call log

fn tag_name(tag: u32) -> String {
    match tag {
        0 => "IN".into(),
        1 => "OUT".into(),
        2 => "INOUT".into(),
        3 => "OUTX".into(),
        4 => "NODEP".into(),
        x => format!("tag{x}"),
    }
}

pub(crate) fn fmt_tensor(t: &Tensor) -> String {
    let nd = (t.ndim as usize).min(5);
    let shape: Vec<String> = t.shape[..nd].iter().map(|s| s.to_string()).collect();
    let mut s = format!("{} {:#x}", tag_name(t.tag), t.data as u64);
    if t.offset != 0 {
        s += &format!("+{}", t.offset);
    }
    s += &format!(" dt{} [{}]", t.dtype, shape.join("x"));
    if t.ndim as usize > 5 {
        s += &format!(" ndim{}", t.ndim);
    }
    if t.strides[..nd].iter().any(|&x| x != 0) {
        let st: Vec<String> = t.strides[..nd].iter().map(|s| s.to_string()).collect();
        s += &format!(" st[{}]", st.join(","));
    }
    if t.reserved != 0 {
        s += &format!(" rsv{}", t.reserved);
    }
    s
}

pub(crate) fn fmt_handle(h: &TaskHandle) -> String {
    format!("{{run {}, slot {:#x}}}", h.run_id, h.slot)
}

pub(crate) fn fmt_dep(d: &Dep) -> String {
    let k = match (d.kind, d.reserved) {
        (0, 0) => String::new(),
        (1, 0) => " wait".into(),
        (k, r) => format!(" kind{k} rsv{r}"),
    };
    format!("{}{k}", fmt_handle(&d.handle))
}

pub(crate) fn fmt_callable(c: &Callable) -> String {
    let reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    for ((name, ns, kind), (_, _, id)) in reg.iter() {
        if id == c {
            return format!("{name}/ns{ns}/k{kind}");
        }
    }
    format!(
        "callable?{:02x}{:02x}/ns{}/k{}",
        c.digest[0], c.digest[1], c.ns, c.kind
    )
}
