// Overloaded{...}: one visitor for std::visit built from lambdas, one per
// alternative of a variant.
#ifndef HRX_SHARED_OVERLOADED_H_
#define HRX_SHARED_OVERLOADED_H_

namespace hrx {

template <class... Visitors>
struct Overloaded : Visitors... {
  using Visitors::operator()...;
};
template <class... Visitors>
Overloaded(Visitors...) -> Overloaded<Visitors...>;

}  // namespace hrx

#endif  // HRX_SHARED_OVERLOADED_H_
