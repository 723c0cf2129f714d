"""A price list (spec field prices) prices the bill of materials; the folder keeps a copy."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from topo import SpecError, build_fabric, load_spec
from topo.cli import main
from topo.cabling import plan_cabling
from topo.outputs.cabling import bom_csv

ROOT = Path(__file__).resolve().parents[1]
ILLUSTRATIVE = ROOT / "examples" / "prices" / "illustrative.yaml"


def priced(spec: dict) -> "object":
    return plan_cabling(build_fabric(load_spec({**spec, "prices": str(ILLUSTRATIVE)})))


@pytest.mark.parametrize("spec", [
    {"gpus": 1024}, {"gpus": 1024, "switch": "eth-51t-64x800"}, {"gpus": 1024, "switch": "eth-51t-64x800", "nic_gbps": 200},
    {"gpus": 768, "placement": "rack", "switch": "eth-25t-64x400"}, {"gpus": 4096, "switch": "ndr-64x400", "tiers": 3},
])
def test_the_cost_is_the_sum_of_the_priced_bom_lines(spec):
    cabling = priced(spec)
    cost = cabling.cost
    assert cost["unpriced"] == [] and cost["currency"] == "USD"  # the illustrative list prices every item
    rows = list(csv.DictReader(io.StringIO(bom_csv(cabling))))
    assert sum(float(r["price"]) for r in rows) == pytest.approx(cost["total"])
    for r in rows:
        assert float(r["price"]) == pytest.approx(float(r["unit_price"]) * int(r["quantity"]))
    assert sum(cost["by_category"].values()) == pytest.approx(cost["total"])
    assert cabling.to_dict()["cost"]["total"] == cost["total"] and "lines" not in cabling.to_dict()["cost"]


def test_without_a_price_list_nothing_changes():
    cabling = plan_cabling(build_fabric(load_spec({"gpus": 1024})))
    assert cabling.cost is None and "cost" not in cabling.to_dict()
    assert bom_csv(cabling).splitlines()[0] == "category,item,tier,end,length_m,quantity,unit_power_w,power_w"


def test_an_unpriced_item_is_named_and_left_out(tmp_path):
    partial = tmp_path / "p.yaml"
    partial.write_text("currency: EUR\nswitches: {eth-25t-64x400: 30000}\n")
    fabric = build_fabric(load_spec({"gpus": 1024, "switch": "eth-25t-64x400", "prices": str(partial)}))
    cabling = plan_cabling(fabric)
    assert cabling.cost["total"] == 48 * 30000 and cabling.cost["currency"] == "EUR"
    assert "MPO-12/APC OM4 fibre" in cabling.cost["unpriced"]
    from topo.outputs.caveats import caveats
    (c,) = [c for c in caveats(fabric, cabling=cabling) if c.code == "prices-incomplete"]
    assert c.message.startswith("the price list has no price for MPO-12/APC OM4 fibre")


@pytest.mark.parametrize("text, message", [
    ("switches: {eth-25t-64x400: -1}\n", "switches: eth-25t-64x400: expected a price from 0 to 10,000,000, got -1"),
    ("cables: {MPO: cheap}\n", "cables: MPO: expected a price from 0 to 10,000,000, got 'cheap'"),
    ("currency: US dollars\n", "currency: expected a short name such as USD, got 'US dollars'"),
    ("optics: {x: 1}\n", "unknown key 'optics' (keys: currency, note, switches, cables, transceivers)"),
    ("- 1\n- 2\n", "expected a mapping with currency and switches, cables, transceivers"),
])
def test_a_bad_price_list_is_refused_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match="prices: " + str(path).replace(".", r"\.") + ": " + message.replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.").replace("{", r"\{")):
        load_spec({"gpus": 1024, "prices": str(path)})


def test_a_missing_price_list_is_one_line_and_no_folder(tmp_path):
    out = tmp_path / "d"
    result = CliRunner().invoke(main, ["build", "--gpus", "64", "--prices", str(tmp_path / "none.yaml"), "-o", str(out)],
                                prog_name="topo")
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "prices:" in result.output
    assert not out.exists()


def test_the_folder_keeps_the_list_and_rebuilds_byte_for_byte(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["--gpus", "1024", "--switch", "eth-51t-64x800", "--prices", str(ILLUSTRATIVE), "-q", "--no-warnings"]
    result = CliRunner().invoke(main, ["build", *args, "-o", str(a), "--format", "json"], prog_name="topo")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["cabling"]["cost"]["note"] == "illustrative prices, not quotes"
    assert (a / "spec.yaml").read_text().count("prices: prices.yaml") == 1
    rebuilt = CliRunner().invoke(main, ["build", "-f", str(a / "spec.yaml"), "-o", str(b), "-q", "--no-warnings"],
                                 prog_name="topo")
    assert rebuilt.exit_code == 0, rebuilt.output
    for path in sorted(p for p in a.rglob("*") if p.is_file()):
        assert (b / path.relative_to(a)).read_bytes() == path.read_bytes(), path
    check = CliRunner().invoke(main, ["check", str(a), "-q"], prog_name="topo")
    assert check.exit_code == 0, check.output
