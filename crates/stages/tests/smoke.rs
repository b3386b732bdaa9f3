mod common;
use stages::Stage;
#[test]
fn smoke() {
    let Some(mut i) = common::instance("smoke") else {
        return;
    };
    let f = wire::build::Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80).build();
    let o = i.test_run(Stage::Dec, &f, 0).unwrap();
    assert_eq!(o.ret, common::XDP_PASS);
    assert_eq!(o.frame, f);
    let o = i.test_run(Stage::Cls, &f, 0).unwrap();
    assert_eq!(o.ret, common::TC_ACT_OK);
    assert_eq!(o.frame, f);
    eprintln!("{:?}", i.counters(stages::maps::CounterStage::Dec));
    eprintln!("{:?}", i);
}
