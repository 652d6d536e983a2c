def price(catalog, sku):
    return catalog[sku]


def test_price_lookup(catalog):
    assert price(catalog, "A1") == 2.5


class TestRounding:
    def test_rounds_half_up(self):
        assert round(2.5) == 2
