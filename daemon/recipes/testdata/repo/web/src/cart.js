export function total(items) {
  return items.reduce((sum, i) => sum + i.price * i.qty, 0);
}
const port = process.env.SHOP_WEB_PORT || 3000;
export default port;
